"""Real PostgreSQL failures through `store_failures()`: the transient ones are
`StoreUnavailable` (503, retried), the refused statements `StoreError` (a bug: 500 with
the request id, logged at ERROR with the SQLSTATE)."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import Callable
from datetime import timedelta

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from jobqueue.adapters.postgres.database import create_engine, normalize_url
from jobqueue.adapters.postgres.failures import is_transient, store_failures
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.errors import StoreError, StoreUnavailable
from jobqueue.domain.job import Job, NewJob
from tests.fakes import TEST_TYPES
from tests.support.api import build_api
from tests.support.logs import captured_json_log

PROBE = "failure_probe"


@pytest.fixture
async def probe(engine: AsyncEngine) -> AsyncEngine:
    """`engine`, with a one-row table of this test's own to conflict over."""
    async with engine.begin() as connection:
        await connection.execute(
            text(f"CREATE TABLE IF NOT EXISTS {PROBE} (id int PRIMARY KEY, n int NOT NULL)")
        )
        await connection.execute(text(f"TRUNCATE {PROBE}"))
        await connection.execute(text(f"INSERT INTO {PROBE} VALUES (1, 0)"))
    return engine


async def failure_of(connection: AsyncConnection, statement: str) -> BaseException:
    with pytest.raises((StoreError, StoreUnavailable)) as raised, store_failures():
        await connection.execute(text(statement))
    return raised.value


@pytest.mark.parametrize(
    ("statement", "code", "says"),
    [
        ("SELEC 1", "42601", 'PostgresSyntaxError: syntax error at or near "SELEC"'),
        ("SELECT * FROM no_such_table", "42P01", 'relation "no_such_table" does not exist'),
        ("SELECT no_such_column FROM jobs", "42703", "column"),
        ("SELECT 1 / 0", "22012", "DivisionByZeroError: division by zero"),
        ("SELECT 'not a uuid'::uuid", "22P02", "invalid input syntax for type uuid"),
        (f"INSERT INTO {PROBE} VALUES (1, 1)", "23505", "duplicate key value violates"),
        (f"INSERT INTO {PROBE} VALUES (2, NULL)", "23502", 'null value in column "n"'),
    ],
    ids=["syntax", "undefined-table", "undefined-column", "division", "data", "unique", "null"],
)
async def test_a_refused_statement_is_a_store_error(
    probe: AsyncEngine, statement: str, code: str, says: str
) -> None:
    async with probe.connect() as connection:
        error = await failure_of(connection, statement)

    assert isinstance(error, StoreError)
    assert error.sqlstate == code
    assert str(error).startswith(f"the job store refused the statement: {code} ")
    assert says in str(error)
    assert not is_transient(error)


async def test_a_statement_timeout_is_store_unavailable(engine: AsyncEngine) -> None:
    async with engine.begin() as connection:
        await connection.execute(text("SET LOCAL statement_timeout = '1ms'"))
        error = await failure_of(connection, "SELECT pg_sleep(1)")

    assert isinstance(error, StoreUnavailable)
    assert "57014 QueryCanceledError: canceling statement due to statement timeout" in str(error)


async def test_a_client_side_command_timeout_is_store_unavailable(database_url: str) -> None:
    engine = create_async_engine(
        normalize_url(database_url), connect_args={"command_timeout": 0.05}
    )
    try:
        async with engine.connect() as connection:
            error = await failure_of(connection, "SELECT pg_sleep(2)")
    finally:
        await engine.dispose()

    assert isinstance(error, StoreUnavailable)
    assert "TimeoutError" in str(error)


# Right after the kill, asyncpg has not yet read the server's goodbye and the statement
# runs into it (SQLAlchemy invalidates the connection); a moment later asyncpg knows the
# connection is closed and refuses to use it. Both are the same outage.
@pytest.mark.parametrize("settle", [0.0, 0.3], ids=["at-once", "after-a-moment"])
async def test_a_terminated_backend_is_store_unavailable_and_its_connection_is_replaced(
    engine: AsyncEngine, settle: float
) -> None:
    async with engine.connect() as victim:
        pid = (await victim.execute(text("SELECT pg_backend_pid()"))).scalar_one()
        async with engine.connect() as killer:
            assert (
                await killer.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
            ).scalar_one()
        await asyncio.sleep(settle)
        error = await failure_of(victim, "SELECT 1")

    assert isinstance(error, StoreUnavailable)
    async with engine.connect() as fresh:
        replaced = (await fresh.execute(text("SELECT pg_backend_pid()"))).scalar_one()
    assert replaced != pid


async def test_a_serialization_failure_is_store_unavailable(probe: AsyncEngine) -> None:
    repeatable = probe.execution_options(isolation_level="REPEATABLE READ")
    async with repeatable.connect() as first, probe.connect() as second:
        await first.execute(text(f"SELECT n FROM {PROBE} WHERE id = 1"))  # the snapshot
        await second.execute(text(f"UPDATE {PROBE} SET n = n + 1 WHERE id = 1"))
        await second.commit()
        error = await failure_of(first, f"UPDATE {PROBE} SET n = n + 1 WHERE id = 1")

    assert isinstance(error, StoreUnavailable)
    assert "40001 SerializationError: could not serialize access" in str(error)


async def test_a_lock_timeout_is_store_unavailable(probe: AsyncEngine) -> None:
    async with probe.connect() as holder, probe.connect() as waiter:
        await holder.execute(text(f"SELECT n FROM {PROBE} WHERE id = 1 FOR UPDATE"))
        await waiter.execute(text("SET LOCAL lock_timeout = '10ms'"))
        error = await failure_of(waiter, f"UPDATE {PROBE} SET n = 2 WHERE id = 1")

    assert isinstance(error, StoreUnavailable)
    assert "55P03" in str(error)


async def test_the_store_on_a_schema_it_does_not_expect_raises_store_error(
    empty_database_url: str,
) -> None:
    engine = create_engine(empty_database_url, pool_size=1)
    try:
        with pytest.raises(StoreError, match=r'42P01 .*relation "jobs" does not exist') as raised:
            await PostgresJobStore(engine).get(uuid.uuid4())
    finally:
        await engine.dispose()
    assert raised.value.sqlstate == "42P01"


# --- over HTTP ----------------------------------------------------------------------------


async def test_a_store_error_is_a_500_with_the_request_id_and_an_error_log_line(
    empty_database_url: str,
) -> None:
    # No jobs table: each request's statement is refused, a bug that retrying cannot fix.
    api = build_api(empty_database_url)
    with captured_json_log() as log:
        async with AsyncTestClient(app=api.app) as client:
            read = await client.get(f"/jobs/{uuid.uuid4()}", headers={"X-Request-ID": "bug-1"})
            submit = await client.post(
                "/jobs",
                json={"type": "webhook", "payload": {"url": "https://example.com/?k=hunter2"}},
                headers={"X-Request-ID": "bug-2"},
            )

    for response, request_id in ((read, "bug-1"), (submit, "bug-2")):
        assert response.status_code == 500, response.text
        assert response.json() == {"error": "internal server error", "request_id": request_id}
        assert "retry-after" not in response.headers
        [logged] = log.find(message="the job store refused a statement", request_id=request_id)
        assert logged["level"] == "ERROR"
        assert logged["sqlstate"] == "42P01"
        assert "StoreError: the job store refused the statement: 42P01" in logged["traceback"]
        assert 'UndefinedTableError: relation "jobs" does not exist' in logged["traceback"]
    # The payload was a parameter of the refused statement: in no log line.
    assert "hunter2" not in log.stream.getvalue()
    assert not log.find(message="store unavailable")


class TimingOutStore(PostgresJobStore):
    """Reading a job runs into the server's statement_timeout."""

    def __init__(self, engine: AsyncEngine) -> None:
        super().__init__(engine)
        self._own = engine

    async def get(self, job_id: uuid.UUID) -> Job:
        with store_failures():
            async with self._own.begin() as connection:
                await connection.execute(text("SET LOCAL statement_timeout = '1ms'"))
                await connection.execute(text("SELECT pg_sleep(1)"))
        raise AssertionError("the statement was not cancelled")


async def test_a_transient_store_failure_stays_a_503_with_retry_after(database_url: str) -> None:
    # As with the other stores handed to build_api, the engine is only used on the app's
    # loop (another thread) and is left to the module database's drop.
    engine = create_engine(database_url, pool_size=1)
    api = build_api(store=TimingOutStore(engine))
    with captured_json_log() as log:
        async with AsyncTestClient(app=api.app) as client:
            response = await client.get(f"/jobs/{uuid.uuid4()}")

    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "1"
    assert response.json() == {"error": "the job store is unavailable; try again shortly"}
    [logged] = log.find(message="store unavailable")
    assert "57014" in logged["error"]
    assert not log.find(message="the job store refused a statement")


# --- the hot path takes connections from the pool without SQLAlchemy's Connection -------
# (`driver.pooled_driver`): opening one can fail with the adapter's own DBAPI error, or a
# bare OSError, which must be classified like the wrapped ones.


def _other_database(database_url: str) -> str:
    return (
        make_url(normalize_url(database_url))
        .set(database="no_such_database")
        .render_as_string(hide_password=False)
    )


def _refused_port_url(database_url: str) -> str:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    url = make_url(normalize_url(database_url)).set(host="127.0.0.1", port=port, query={})
    return url.render_as_string(hide_password=False)


@pytest.mark.parametrize(
    ("url_of", "says"),
    [
        (_other_database, "InvalidCatalogNameError"),
        (_refused_port_url, "ConnectionRefusedError"),
    ],
    ids=["missing-database", "refused-port"],
)
async def test_a_connection_the_hot_path_cannot_open_is_store_unavailable(
    database_url: str, url_of: Callable[[str], str], says: str
) -> None:
    engine = create_engine(url_of(database_url))
    store = PostgresJobStore(engine)
    try:
        with pytest.raises(StoreUnavailable) as submitting:
            await store.submit(NewJob.build(type="noop"))
        with pytest.raises(StoreUnavailable) as claiming:
            await store.claim(5, timedelta(seconds=30), types=TEST_TYPES)
    finally:
        await engine.dispose()

    assert says in str(submitting.value)
    assert says in str(claiming.value)


@pytest.mark.direct_database(
    "finds the pool's one server connection by its application_name, which PgBouncer's "
    "own server connections do not carry"
)
async def test_a_terminated_backend_on_the_hot_path_is_unavailable_then_replaced(
    engine: AsyncEngine,
) -> None:
    # One connection in the pool, so the statement after the kill must meet it.
    name = f"jobqueue-kill-probe-{uuid.uuid4().hex[:8]}"
    url = engine.url.render_as_string(hide_password=False)
    single = create_engine(url, pool_size=1, application_name=name)
    store = PostgresJobStore(single)
    try:
        await store.claim(1, timedelta(seconds=30), types=TEST_TYPES)
        async with engine.connect() as killer:
            killed = await killer.execute(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE application_name = :name"
                ),
                {"name": name},
            )
            assert killed.scalar_one() == 1
        await asyncio.sleep(0.3)
        with pytest.raises(StoreUnavailable):
            await store.claim(1, timedelta(seconds=30), types=TEST_TYPES)
        # The dead connection was invalidated: the next statement gets a fresh one.
        assert await store.claim(1, timedelta(seconds=30), types=TEST_TYPES) == []
    finally:
        await single.dispose()
