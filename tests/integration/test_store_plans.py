"""The hot path's plans with many finished rows: the partial indexes, never a Seq Scan.

The statements explained are the ones the store sends, captured from its engine. Each is
explained twice: as planned for the values given, and as the generic plan a prepared
statement may switch to after a few runs, which cannot see bound values (so a status
bound as a parameter would lose the partial index there).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from typing import Any
from uuid import UUID, uuid4

import pytest
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.errors import LeaseLost
from jobqueue.domain.job import Lease, Status
from tests.support.job_rows import seed_many

FINISHED_ROWS = 200_000

StoreCall = Callable[[PostgresJobStore], Awaitable[object]]


async def _complete_unknown(store: PostgresJobStore) -> None:
    with pytest.raises(LeaseLost):
        await store.complete(Lease(uuid4(), 1))


HOT_PATH: dict[str, tuple[StoreCall, str]] = {
    "claim": (lambda store: store.claim(5, timedelta(minutes=5)), "ix_jobs_due"),
    "recover": (lambda store: store.recover_expired(5), "ix_jobs_lease_expiry"),
    "complete": (_complete_unknown, "pk_jobs"),
}


@pytest.fixture(scope="module")
def big_table(database_url: str) -> str:
    """This module's database holding many finished jobs and a few live ones."""

    async def seed() -> None:
        engine = create_engine(database_url, pool_size=1)
        try:
            async with engine.begin() as connection:
                await connection.execute(
                    text(
                        "INSERT INTO jobs (type, status, attempts, max_attempts, run_at)"
                        " SELECT 'done', 'completed', 1, 3, now() - make_interval(secs => n)"
                        " FROM generate_series(1, :rows) AS n"
                    ),
                    {"rows": FINISHED_ROWS},
                )
            await seed_many(engine, 20, Status.PENDING)
            await seed_many(engine, 20, Status.PROCESSING)
            async with engine.connect() as connection:
                await connection.execute(text("ANALYZE jobs"))
                await connection.commit()
        finally:
            await engine.dispose()

    asyncio.run(seed())
    return database_url


@pytest.fixture
async def plan_engine(big_table: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(big_table, pool_size=1)
    yield engine
    await engine.dispose()


@contextmanager
def capture_statements(engine: AsyncEngine) -> Iterator[list[tuple[str, Sequence[Any]]]]:
    """The SQL text and parameters of every statement the engine sends meanwhile."""
    sent: list[tuple[str, Sequence[Any]]] = []

    def capture(*args: Any) -> None:
        _connection, _cursor, statement, parameters, _context, _many = args
        sent.append((statement, parameters))

    event.listen(engine.sync_engine, "before_cursor_execute", capture)
    try:
        yield sent
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", capture)


def _sql_literal(value: object) -> str:
    # For EXECUTE's arguments only, and only with the store's own test-made values.
    if value is None:
        return "NULL"
    if isinstance(value, bool | int):
        return str(value)
    if isinstance(value, timedelta):
        return f"'{value.total_seconds()} seconds'"
    if isinstance(value, str | UUID):
        return "'" + str(value).replace("'", "''") + "'"
    raise TypeError(f"no literal for {value!r}")


async def _plans(engine: AsyncEngine, statement: str, parameters: Sequence[Any]) -> list[str]:
    """The plan for the given values, then the generic plan."""
    async with engine.connect() as connection:
        custom = await connection.exec_driver_sql("EXPLAIN " + statement, tuple(parameters))
        await connection.exec_driver_sql("SET plan_cache_mode = force_generic_plan")
        await connection.exec_driver_sql("PREPARE hot_path AS " + statement)
        arguments = ", ".join(_sql_literal(value) for value in parameters)
        generic = await connection.exec_driver_sql(f"EXPLAIN EXECUTE hot_path({arguments})")
        plans = ["\n".join(row[0] for row in result) for result in (custom, generic)]
        # Session state outlives the transaction; the pooled connection is reused.
        await connection.exec_driver_sql("DEALLOCATE hot_path")
        await connection.exec_driver_sql("RESET plan_cache_mode")
        await connection.rollback()
    return plans


async def test_hot_path_uses_its_index_among_many_finished_rows(plan_engine: AsyncEngine) -> None:
    # One test for the three statements: the table is filled once per xdist worker.
    for operation, (call, index) in HOT_PATH.items():
        with capture_statements(plan_engine) as sent:
            await call(PostgresJobStore(plan_engine))
        [(statement, parameters)] = [(s, p) for s, p in sent if "jobs" in s]

        for plan in await _plans(plan_engine, statement, parameters):
            assert f"using {index} on jobs" in plan, f"{operation}:\n{plan}"
            assert "Seq Scan on jobs" not in plan, f"{operation}:\n{plan}"
