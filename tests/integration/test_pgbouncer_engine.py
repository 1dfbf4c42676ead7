"""An engine behind a real PgBouncer in transaction mode (Debian's package), in process:
its ten connections share two server connections and run producers and a pool without
a prepared-statement clash; the same load with the drivers' statement caches on fails,
which is what `DATABASE_POOLER=pgbouncer` is for; and PgBouncer refuses a
statement_timeout sent at connection start. Services behind it: test_pgbouncer.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from jobqueue import NewJob, enqueue, enqueue_many
from jobqueue.adapters.handlers import builtin_registry
from jobqueue.adapters.payloads import MsgspecPayloadDecoder
from jobqueue.adapters.postgres.database import (
    create_engine,
    normalize_url,
    statement_timeout_of,
)
from jobqueue.adapters.postgres.limits import Limits
from jobqueue.adapters.postgres.pooler import Pooler
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.backoff import Backoff
from jobqueue.domain.fields import JsonValue
from jobqueue.domain.status import Status
from jobqueue.entrypoints.worker.pool import WorkerPool
from jobqueue.entrypoints.worker.pool_config import PoolConfig
from tests.support import pgbouncer
from tests.support.api import eventually
from tests.support.direct_queries import database_name, direct
from tests.support.pgbouncer import PgBouncer
from tests.support.postgres import Server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tight_pgbouncer(postgres_server: Server) -> Iterator[PgBouncer]:
    """A PgBouncer with two server connections per database: every client statement
    lands on whichever of them is free."""
    if pgbouncer.missing() is not None:
        pytest.fail(str(pgbouncer.missing()), pytrace=False)
    with pgbouncer.running(postgres_server.url, pool_size=2) as bouncer:
        yield bouncer


POOL = PoolConfig(
    workers=4,
    job_timeout=timedelta(seconds=30),
    lease_duration=timedelta(seconds=30),
    poll_interval=timedelta(milliseconds=20),
    shutdown_timeout=timedelta(seconds=10),
    outcome_timeout=timedelta(seconds=5),
    backoff=Backoff(timedelta(milliseconds=10), timedelta(milliseconds=50)),
)
PRODUCERS = 8


async def produce(engine: AsyncEngine, producer: int) -> int:
    """Jobs in every way a producer sends them: alone in autocommit, and several in
    the producer's own transaction."""
    sleep: JsonValue = {"duration": "1ms"}
    for _ in range(5):
        await enqueue(engine, NewJob.build(type="sleep", payload=sleep))
    async with engine.begin() as connection:
        await enqueue(connection, NewJob.build(type="sleep", payload=sleep))
        await enqueue_many(connection, [NewJob.build(type="sleep", payload=sleep)] * 4)
    return 10


async def test_ten_connections_on_two_servers_run_producers_and_a_pool_without_a_clash(
    database_url: str, tight_pgbouncer: PgBouncer
) -> None:
    await direct(database_url, "TRUNCATE jobs")
    engine = create_engine(
        tight_pgbouncer.url(database_url),
        pool_size=10,
        limits=Limits(statement=timedelta(seconds=5), client=timedelta(seconds=6)),
        pooler=Pooler.PGBOUNCER,
    )
    registry = builtin_registry(webhook_allow_private=False)
    pool = WorkerPool(PostgresJobStore(engine), registry, MsgspecPayloadDecoder(), POOL)
    running = asyncio.create_task(pool.run())
    try:
        made = sum(await asyncio.gather(*(produce(engine, n) for n in range(PRODUCERS))))

        async def completed() -> int:
            [row] = await direct(
                database_url,
                "SELECT count(*) AS n FROM jobs WHERE status = $1",
                Status.COMPLETED.value,
            )
            return int(row["n"])

        await eventually(completed, lambda n: n == made, within=60)
        name = database_name(database_url)
        servers = [row for row in tight_pgbouncer.show("SERVERS") if row["database"] == name]
        clients = [row for row in tight_pgbouncer.show("CLIENTS") if row["database"] == name]
    finally:
        pool.stop()
        await asyncio.wait_for(running, 30)
        await engine.dispose()

    assert made == PRODUCERS * 10
    assert 1 <= len(servers) <= 2
    assert len(clients) > len(servers)  # the engine's connections took turns on them


async def test_with_the_statement_caches_on_the_same_clients_clash(
    database_url: str, tight_pgbouncer: PgBouncer
) -> None:
    # SQLAlchemy's own engine, caches on: `create_engine` without `Pooler.PGBOUNCER` would
    # be refused at connection start first (the test below).
    engine = create_async_engine(normalize_url(tight_pgbouncer.url(database_url)), pool_size=10)
    try:
        with pytest.raises(Exception, match="prepared statement"):
            await asyncio.gather(*(produce(engine, n) for n in range(PRODUCERS)))
    finally:
        await engine.dispose()


async def test_pgbouncer_refuses_the_settings_a_session_of_its_own_gets_at_start(
    database_url: str, pgbouncer_server: PgBouncer
) -> None:
    # `database.SESSION_SETTINGS`, and the statement timeout: all refused, the first named.
    limits = Limits(statement=timedelta(seconds=5), client=timedelta(seconds=6))
    for given in (None, limits):
        engine = create_engine(pgbouncer_server.url(database_url), pool_size=1, limits=given)
        try:
            with pytest.raises(Exception, match="unsupported startup parameter: plan_cache_mode"):
                await statement_timeout_of(engine)
        finally:
            await engine.dispose()
