"""`GET /jobs`'s query among many finished rows: each status is read from its own index,
never by a scan of the whole table, with or without a type and a cursor.

The statements explained are the ones the store sends, captured from its engine, as
planned for the values given and as a reused generic plan (see `tests/support/plans.py`).
"""

from __future__ import annotations

import itertools

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.listing import JobQuery
from jobqueue.domain.status import BY_QUEUE, TRAITS, Status
from tests.support.plans import (
    FINISHED_ROWS,
    capture_statements,
    custom_and_generic_plans,
    fill_table,
    reads_status_index,
)

# The index each status's traits say serves its listing: this test is what holds them to it.
INDEXES = {status: TRAITS[status].index for status in Status}
# 'done' is every finished row's type, 'rare' none's: the planner's estimates for the two
# lie at opposite ends, and neither may tip it into a scan. Completed jobs cannot be
# listed by queue (`by_queue` is off): no index holds them by it.
TYPES = (None, "done", "rare")
QUEUES = (None, "default", "rare")


@pytest.fixture(scope="module")
def big_table(database_url: str) -> str:
    """This module's database: many finished jobs, a few of every other status."""
    fill_table(
        database_url,
        [
            ("completed", FINISHED_ROWS, 1),
            ("failed", FINISHED_ROWS // 100, 1),
            ("dead_letter", 50, 1),
            ("cancelled", 50, 1),
        ],
    )
    return database_url


async def test_every_listing_reads_its_status_index_among_many_finished_rows(
    plan_engine: AsyncEngine,
) -> None:
    # One test for every shape: the table is filled once per xdist worker.
    store = PostgresJobStore(plan_engine)
    for status in INDEXES:
        first = await store.list_jobs(JobQuery(status, limit=5))
        assert first.next is not None, status
        narrowed = itertools.product(TYPES, QUEUES if status in BY_QUEUE else (None,))
        for (job_type, queue), after in itertools.product(narrowed, (None, first.next)):
            shape = f"{status} type={job_type} queue={queue} after={after}"
            with capture_statements(plan_engine) as sent:
                await store.list_jobs(JobQuery(status, job_type, 5, after, queue))
            [(statement, parameters)] = [(s, p) for s, p in sent if "jobs" in s]

            for plan in await custom_and_generic_plans(plan_engine, statement, parameters):
                assert reads_status_index(plan, status), f"{shape}:\n{plan}"
                assert "Seq Scan on jobs" not in plan, f"{shape}:\n{plan}"
