"""Retention's delete and the queue-depth counts among many finished rows: each reads its
partial index, never the whole table.

The statements explained are the ones the store and the stats send, captured from their
engine, explained as planned and as a reused generic plan (`tests/support/plans.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.stats import PostgresQueueStats
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.status import COUNTED, PRUNABLE, TRAITS, Status
from jobqueue.entrypoints.worker.retention import DEFAULT_BATCH_SIZE
from tests.support.plans import (
    FINISHED_ROWS,
    capture_statements,
    custom_and_generic_plans,
    fill_table,
    reads_status_index,
)

WEEK = timedelta(days=7)
MONTH = timedelta(days=30)


@pytest.fixture(scope="module")
def big_table(database_url: str) -> str:
    """This module's database: many finished jobs of every age, a few of the others."""
    # Completed over the last two weeks (half past the default week), failed over two
    # months: retention has plenty to do, as after a long outage.
    fill_table(
        database_url,
        [
            ("completed", FINISHED_ROWS, 6),
            ("failed", FINISHED_ROWS // 100, 2_600),
            ("dead_letter", 50, 100_000),
        ],
    )
    return database_url


PRUNES: dict[str, Mapping[Status, timedelta]] = {
    "completed": {Status.COMPLETED: WEEK},
    "failed": {Status.FAILED: MONTH},
    "both": {Status.COMPLETED: WEEK, Status.FAILED: MONTH},
}


async def test_pruning_reads_the_finished_index_among_many_finished_rows(
    plan_engine: AsyncEngine,
) -> None:
    # One test for every shape: the table is filled once per xdist worker. Running the
    # prune to capture it deletes a batch of the size the loop uses: a small share of the
    # old rows, which changes no plan.
    store = PostgresJobStore(plan_engine)
    for shape, ages in PRUNES.items():
        with capture_statements(plan_engine) as sent:
            assert await store.prune_finished(ages, DEFAULT_BATCH_SIZE) > 0
        [(statement, parameters)] = [(s, p) for s, p in sent if "jobs" in s]

        for plan in await custom_and_generic_plans(plan_engine, statement, parameters):
            for status in ages:
                assert f"Index Cond: ((status = '{status}'::text)" in plan, f"{shape}:\n{plan}"
            assert "ix_jobs_finished_by_type on jobs" in plan, f"{shape}:\n{plan}"
            # The batch's rows are then found by primary key, not by a join over the table.
            assert "on pk_jobs" in plan, f"{shape}:\n{plan}"
            assert "Seq Scan on jobs" not in plan, f"{shape}:\n{plan}"
            # Age order straight from the index: a sort would read every old row first.
            assert "Sort Key: jobs" not in plan, f"{shape}:\n{plan}"


async def test_queue_depth_counts_read_only_the_small_partial_indexes(
    plan_engine: AsyncEngine,
) -> None:
    stats = PostgresQueueStats(plan_engine)
    with capture_statements(plan_engine) as sent:
        counts = await stats.count_by_status()
    [(statement, parameters)] = [(s, p) for s, p in sent if "jobs" in s]

    assert counts == {
        Status.WAITING: 20,
        Status.PENDING: 20,
        Status.PROCESSING: 20,
        Status.DEAD_LETTER: 50,
    }
    for plan in await custom_and_generic_plans(plan_engine, statement, parameters):
        for status in COUNTED:
            # An index scan or a bitmap scan of the index: both read only its few rows.
            assert reads_status_index(plan, status), plan
        assert "Seq Scan on jobs" not in plan, plan
        for index in {TRAITS[status].index for status in PRUNABLE}:
            assert index not in plan, plan
