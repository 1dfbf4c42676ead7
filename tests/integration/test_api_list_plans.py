"""`GET /jobs`'s query among many finished rows: each status is read from its own index,
never by a scan of the whole table, with or without a type and a cursor.

The statements explained are the ones the store sends, captured from its engine, as
planned for the values given and as a reused generic plan (see `tests/support/plans.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.job import Status
from jobqueue.domain.listing import TYPE_FILTERABLE, JobQuery
from tests.support.job_rows import seed_many
from tests.support.plans import capture_statements, custom_and_generic_plans, uses_index

FINISHED_ROWS = 200_000

INDEXES = {
    Status.PENDING: "ix_jobs_due",
    Status.PROCESSING: "ix_jobs_lease_expiry",
    Status.COMPLETED: "ix_jobs_finished",
    Status.FAILED: "ix_jobs_finished",
    Status.DEAD_LETTER: "ix_jobs_dead_letter",
}
# 'done' is every finished row's type, 'rare' none's: the planner's estimates for the two
# lie at opposite ends, and neither may tip it into a scan. Completed jobs cannot be
# listed by type (`TYPE_FILTERABLE`): no index holds them by it.
TYPES = (None, "done", "rare")


@pytest.fixture(scope="module")
def big_table(database_url: str) -> str:
    """This module's database: many finished jobs, a few of every other status."""

    async def seed() -> None:
        engine = create_engine(database_url, pool_size=1)
        try:
            async with engine.begin() as connection:
                for status, rows in (
                    ("completed", FINISHED_ROWS),
                    ("failed", FINISHED_ROWS // 100),
                    ("dead_letter", 50),
                ):
                    await connection.execute(
                        text(
                            "INSERT INTO jobs (type, status, attempts, max_attempts, run_at,"
                            "                  updated_at)"
                            " SELECT 'done', :status, 1, 3, now() - make_interval(secs => n),"
                            "        now() - make_interval(secs => n)"
                            " FROM generate_series(1, :rows) AS n"
                        ),
                        {"status": status, "rows": rows},
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


async def test_every_listing_reads_its_status_index_among_many_finished_rows(
    plan_engine: AsyncEngine,
) -> None:
    # One test for every shape: the table is filled once per xdist worker.
    store = PostgresJobStore(plan_engine)
    for status, index in INDEXES.items():
        first = await store.list_jobs(JobQuery(status, limit=5))
        assert first.next is not None, status
        for job_type in TYPES if status in TYPE_FILTERABLE else (None,):
            for after in (None, first.next):
                shape = f"{status} type={job_type} after={after}"
                with capture_statements(plan_engine) as sent:
                    await store.list_jobs(JobQuery(status, job_type, 5, after))
                [(statement, parameters)] = [(s, p) for s, p in sent if "jobs" in s]

                for plan in await custom_and_generic_plans(plan_engine, statement, parameters):
                    assert uses_index(plan, index), f"{shape}:\n{plan}"
                    assert "Seq Scan on jobs" not in plan, f"{shape}:\n{plan}"
