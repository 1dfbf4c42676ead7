"""Jobs scheduled for later cost the claim nothing: it reads the due index up to the first
job not yet due and stops, however many wait behind it."""

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


async def test_a_claim_among_many_scheduled_jobs_reads_only_the_due_ones(
    scheduled_engine: AsyncEngine,
) -> None:
    store = PostgresJobStore(scheduled_engine)
    with capture_statements(scheduled_engine) as sent:
        # Asking for more than is due: the scan must still stop at the first later job.
        claimed = await store.claim(DUE * 5, timedelta(minutes=5))
    [(statement, parameters)] = [(s, p) for s, p in sent if "jobs" in s]

    assert len(claimed) == DUE
    assert "later" not in {job.type for job in claimed}
    async with scheduled_engine.connect() as connection:
        result = await connection.exec_driver_sql(
            "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + statement, tuple(parameters)
        )
        plan = "\n".join(row[0] for row in result)
        await connection.rollback()
    assert uses_index(plan, "ix_jobs_due_by_queue"), plan
    assert "Seq Scan on jobs" not in plan, plan
    # The buffers the whole statement touched (its top node's count, which includes its
    # children's), run again here with the due jobs now claimed: a scan into the
    # scheduled jobs would read hundreds of index and heap pages.
    top = next(line for line in plan.splitlines() if "Buffers:" in line)
    touched = sum(int(n) for n in re.findall(r"shared (?:hit|read)=(\d+)", top))
    assert touched < 100, plan
    assert await count_jobs(scheduled_engine, Status.PENDING) == SCHEDULED
