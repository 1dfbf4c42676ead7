"""Database fixtures for the integration and contract suites: a real PostgreSQL, a
migrated database per test module. Unit tests never request them, so they never
start a server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.database import create_engine
from tests.support import pgbouncer
from tests.support.postgres import (
    Server,
    create_database,
    drop_database,
    ensure_template,
    resolve_server,
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{pgbouncer.MARKER}(why): with {pgbouncer.SWITCH}=1, still reach PostgreSQL "
        "directly: what the test checks needs a session of its own or the server itself",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests that run real processes and faults (modules `test_faults_*` and
    `*_processes`: tens of seconds to minutes each) first, in their order, so that they
    start first, and the short ones fill in around them, rather than one worker waiting
    alone on a long test at the end of the run. Parallel runs use xdist's `worksteal`:
    each worker starts on half of the tests, in this order, and one that runs out takes
    half of what the other has not started, from its end (the short ones)."""
    items.sort(key=lambda item: not _runs_processes(item.path.stem))


def _runs_processes(module: str) -> bool:
    return module.startswith("test_faults_") or module.endswith("_processes")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Before any fixture of the test is set up, module-scoped services included.
    pgbouncer.ROUTING.current_test_direct = item.get_closest_marker(pgbouncer.MARKER) is not None


# What went through PgBouncer in this process, or in each xdist worker (reported when it
# finishes), for the summary that shows the switch really routed the suite.
_THROUGH_PGBOUNCER: list[dict[str, int]] = []


def pytest_sessionfinish(session: pytest.Session) -> None:
    totals = pgbouncer.ROUTING.stop_all()
    output = getattr(session.config, "workeroutput", None)
    if output is not None:  # an xdist worker: its controller prints the summary
        output["pgbouncer"] = totals
    else:
        _THROUGH_PGBOUNCER.append(totals)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    totals = getattr(node, "workeroutput", {}).get("pgbouncer")
    if totals is not None:
        _THROUGH_PGBOUNCER.append(totals)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if pgbouncer.ROUTING.enabled:
        terminalreporter.write_line(pgbouncer.summary(_THROUGH_PGBOUNCER))


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Server]:
    with resolve_server() as server:
        yield server


@pytest.fixture(scope="session")
def template_database(postgres_server: Server) -> str:
    return ensure_template(postgres_server.url)


@pytest.fixture(scope="module")
def database_url(
    postgres_server: Server, template_database: str, request: pytest.FixtureRequest
) -> Iterator[str]:
    """A migrated database of this module's own (and this xdist worker's own)."""
    url = create_database(postgres_server.url, template_database, request.node.nodeid)
    yield url
    drop_database(postgres_server.url, url)


@pytest.fixture
def empty_database_url(postgres_server: Server, request: pytest.FixtureRequest) -> Iterator[str]:
    """A database with no schema at all, for migration tests."""
    url = create_database(postgres_server.url, None, request.node.nodeid)
    yield url
    drop_database(postgres_server.url, url)


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    """An engine on this module's database, emptied before each test."""
    url, pooler = pgbouncer.routed_url(database_url)
    engine = create_engine(url, pool_size=5, pooler=pooler)
    await _emptied(engine)
    yield engine
    await engine.dispose()


# A module's running services claim from its database meanwhile: a claim locks `queues`
# (its pause probe) before `jobs`, TRUNCATE the other way round, and PostgreSQL then
# breaks the deadlock by failing one of them. The claim is retried by its service; the
# TRUNCATE is retried here.
_TRUNCATE_TRIES = 5


async def _emptied(engine: AsyncEngine) -> None:
    for tried in range(1, _TRUNCATE_TRIES + 1):
        try:
            async with engine.begin() as connection:
                # Not `processes`: a module's running services keep their heartbeats in it.
                await connection.execute(
                    text(
                        "TRUNCATE jobs, queues, key_starts, type_rates, job_types, periodic_slots,"
                        " job_rollup, job_dependencies, job_waits"
                    )
                )
            return
        except DBAPIError as error:
            if "deadlock detected" not in str(error) or tried == _TRUNCATE_TRIES:
                raise


@pytest.fixture(scope="session")
def pgbouncer_server(postgres_server: Server) -> Iterator[pgbouncer.PgBouncer]:
    """A PgBouncer in transaction mode in front of the test server (Debian's package)."""
    why = pgbouncer.missing()
    if why is not None:
        # Not a skip: a machine without it would pass the suite without testing it.
        pytest.fail(why, pytrace=False)
    with pgbouncer.running(postgres_server.url) as bouncer:
        yield bouncer
