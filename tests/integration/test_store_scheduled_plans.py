"""What a claim does not run costs it nothing: jobs scheduled for later (it reads each range
of the due index up to the first job not yet due and stops, however many wait behind it),
and jobs of types its process has no handler for (their ranges are never read)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.status import Status
from tests.support.job_rows import count_jobs
from tests.support.plans import capture_statements, fill_table, uses_index

SCHEDULED = 100_000
# fill_table's due pending jobs.
DUE = 20


@pytest.fixture(scope="module")
def scheduled_table(database_url: str) -> str:
    fill_table(database_url, [], scheduled=SCHEDULED)
    return database_url


@pytest.fixture
async def scheduled_engine(scheduled_table: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(scheduled_table, pool_size=1)
    yield engine
    await engine.dispose()


async def _claimed_and_touched(
    engine: AsyncEngine, types: frozenset[str], limit: int
) -> tuple[list[str], int, str]:
    """The types of the jobs a claim of `types` took, and the buffers the same statement
    touched run again (its top node's count, which includes its children's), with its
    plan."""
    store = PostgresJobStore(engine)
    with capture_statements(engine) as sent:
        claimed = await store.claim(limit, timedelta(minutes=5), types=types)
    [(statement, parameters)] = [(s, p) for s, p in sent if "jobs" in s]
    async with engine.connect() as connection:
        result = await connection.exec_driver_sql(
            "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + statement, tuple(parameters)
        )
        plan = "\n".join(row[0] for row in result)
        await connection.rollback()
    assert uses_index(plan, "ix_jobs_due_by_type"), plan
    assert "Seq Scan on jobs" not in plan, plan
    top = next(line for line in plan.splitlines() if "Buffers:" in line)
    touched = sum(int(n) for n in re.findall(r"shared (?:hit|read)=(\d+)", top))
    return [job.type for job in claimed], touched, plan


async def test_a_claim_among_many_scheduled_jobs_reads_only_the_due_ones(
    scheduled_engine: AsyncEngine,
) -> None:
    # A process running the seeded types and one more. Asking for more than is due: each
    # range's scan must still stop at the first job not yet due.
    types = frozenset({"bulk", "later", "sleep"})
    claimed, touched, plan = await _claimed_and_touched(scheduled_engine, types, DUE * 5)

    assert claimed == ["bulk"] * DUE
    # Run again with the due jobs now claimed: an empty range costs one index descent
    # (30 ranges: 10 priorities by 3 types), while a scan into the scheduled jobs would
    # read hundreds of index and heap pages.
    assert touched < 150, plan
    assert await count_jobs(scheduled_engine, Status.PENDING) == SCHEDULED


async def test_a_claim_never_reads_the_jobs_of_types_its_process_cannot_run(
    scheduled_engine: AsyncEngine,
) -> None:
    # Due jobs of a type this process has no handler for, many of them, at the head of
    # the queue's most urgent priority: they wait for another process, untouched. Counted
    # from here: the module's other test may or may not have claimed the seeded due jobs
    # (xdist can run it on another worker).
    pending = await count_jobs(scheduled_engine, Status.PENDING)
    async with scheduled_engine.begin() as connection:
        await connection.exec_driver_sql(
            "INSERT INTO jobs (type, max_attempts, run_at)"
            " SELECT 'elsewhere', 3, now() - interval '1 day' FROM generate_series(1, 50000)"
        )
        await connection.exec_driver_sql("ANALYZE jobs")
    try:
        claimed, touched, plan = await _claimed_and_touched(
            scheduled_engine, frozenset({"mine"}), 10
        )
        assert claimed == []
        # One descent per (priority, type) range, none of them into the 50,000.
        assert touched < 60, plan
        assert await count_jobs(scheduled_engine, Status.PENDING) == pending + 50_000
    finally:
        async with scheduled_engine.begin() as connection:
            await connection.exec_driver_sql("DELETE FROM jobs WHERE type = 'elsewhere'")
