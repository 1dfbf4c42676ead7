"""A claim first prepared while `jobs` is empty reads the due index once the table has
grown, without waiting for an ANALYZE: connections prepare their statements again every
`PLAN_LIFETIME_SECONDS` (`adapters/postgres/database.py`), and each is then planned for
the table's current size.

Before that, a worker started on an empty table kept the generic plan PostgreSQL made
after the claim's fifth run, a sequential scan of `jobs` for every range the claim reads,
until autovacuum next analyzed the table.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.database import PLAN_LIFETIME_SECONDS, autocommit, create_engine
from jobqueue.adapters.postgres.driver import pooled_driver
from jobqueue.adapters.postgres.queries import claims as c
from jobqueue.adapters.postgres.store import PostgresJobStore
from tests.support.plans import capture_statements, sql_literal, uses_index

TYPES = frozenset({"grown", "other"})
GROWN_ROWS = 20_000


@pytest.fixture
async def lone_engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    """One connection, so every claim and every look at its prepared statements is on
    the same session; never through PgBouncer, which turns the statement cache off."""
    engine = create_engine(database_url, pool_size=1)
    async with autocommit(engine).connect() as connection:
        await connection.execute(text("TRUNCATE jobs, queues"))
        # Autovacuum's ANALYZE would re-plan the claim by itself: this test is about
        # the table growing before it comes.
        await connection.execute(text("ALTER TABLE jobs SET (autovacuum_enabled = false)"))
        await connection.execute(text("VACUUM ANALYZE jobs"))
    yield engine
    async with autocommit(engine).connect() as connection:
        await connection.execute(text("ALTER TABLE jobs RESET (autovacuum_enabled)"))
    await engine.dispose()


async def _claim_plans(engine: AsyncEngine, arguments: Sequence[Any]) -> list[str]:
    """The plan each claim statement prepared on the connection would run now."""
    literals = ", ".join(sql_literal(value) for value in arguments)
    async with pooled_driver(engine) as driver:
        names = await driver.fetch(
            "SELECT name FROM pg_prepared_statements WHERE statement = $1", c.CLAIM.numbered
        )
        plans = []
        for (name,) in names:
            rows = await driver.fetch(f'EXPLAIN EXECUTE "{name}"({literals})')
            plans.append("\n".join(row[0] for row in rows))
    return plans


def _reads_the_index(plan: str) -> bool:
    return uses_index(plan, "ix_jobs_due_by_type") and "Seq Scan on jobs" not in plan


async def test_a_claim_prepared_on_an_empty_table_reads_the_index_once_the_table_grew(
    lone_engine: AsyncEngine,
) -> None:
    store = PostgresJobStore(lone_engine)
    with capture_statements(lone_engine) as sent:
        # Past the five runs after which PostgreSQL may keep the generic plan.
        for _ in range(8):
            assert await store.claim(5, timedelta(minutes=5), types=TYPES) == []
    arguments = next(arguments for sql, arguments in sent if sql == c.CLAIM.numbered)
    # The plan made for the empty table: one sequential scan per range.
    before = await _claim_plans(lone_engine, arguments)
    assert before
    assert all("Seq Scan on jobs" in plan for plan in before), before

    async with lone_engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO jobs (type, status, attempts, max_attempts, run_at, updated_at)"
                " SELECT 'done', 'completed', 1, 3, now(), now()"
                " FROM generate_series(1, :rows)"
            ),
            {"rows": GROWN_ROWS},
        )

    deadline = asyncio.get_running_loop().time() + 5 * PLAN_LIFETIME_SECONDS
    while True:
        assert await store.claim(5, timedelta(minutes=5), types=TYPES) == []
        plans = await _claim_plans(lone_engine, arguments)
        if plans and all(_reads_the_index(plan) for plan in plans):
            break
        assert asyncio.get_running_loop().time() < deadline, plans
        # The next claim's turn: a worker polls, it does not spin.
        await asyncio.sleep(0.2)


async def test_a_claim_runs_one_plan_made_for_any_values(lone_engine: AsyncEngine) -> None:
    """Left to choose, PostgreSQL planned every claim for its values (no generic plan in
    60 runs: on paper it costs more), half a millisecond of each pickup; the service's
    connections plan each prepared statement once (`database.SESSION_SETTINGS`)."""
    store = PostgresJobStore(lone_engine)
    for _ in range(8):
        assert await store.claim(5, timedelta(minutes=5), types=TYPES) == []
    async with pooled_driver(lone_engine) as driver:
        counts = await driver.fetch(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1",
            c.CLAIM.numbered,
        )
    assert counts
    assert sum(generic for generic, _ in counts) >= 1
    assert all(custom == 0 for _, custom in counts), counts


async def test_no_statement_is_compiled_by_jit(lone_engine: AsyncEngine) -> None:
    """The embedded server the tests run on has no JIT, but most servers do: a listing's
    bounded search, estimated past `jit_above_cost`, spent ~500 ms compiling there."""
    async with lone_engine.connect() as connection:
        assert (await connection.execute(text("SHOW jit"))).scalar_one() == "off"
