"""Retention against PostgreSQL: the loop clears a backlog in batches, by the database's
clock, and processes pruning at once share the work without deleting anything twice.

Jobs are made old by moving their `updated_at` back, as the days would.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.schema import jobs
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.adapters.telemetry.metrics import Metrics
from jobqueue.domain.retention import RetentionPolicy
from jobqueue.domain.status import Status
from jobqueue.entrypoints.worker.retention import RetentionLoop
from tests.support.job_rows import seed_many
from tests.support.processes import free_port, start

TICK = timedelta(seconds=1)


async def age(engine: AsyncEngine, status: Status, by: timedelta, limit: int | None = None) -> None:
    """Move back `updated_at` of (up to `limit`) jobs at `status` that are not aged yet."""
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "UPDATE jobs SET updated_at = now() - CAST(:by AS interval) WHERE id IN ("
                "  SELECT id FROM jobs WHERE status = :status AND updated_at >= now()"
                "  - interval '1 minute' LIMIT :limit)"
            ),
            {"by": by, "status": status.value, "limit": limit},
        )


async def counts(engine: AsyncEngine) -> dict[Status, int]:
    async with engine.connect() as connection:
        rows = await connection.execute(select(jobs.c.status, func.count()).group_by(jobs.c.status))
        return {Status(status): count for status, count in rows}


async def test_the_default_policy_clears_a_backlog_and_keeps_what_it_must(
    engine: AsyncEngine,
) -> None:
    await seed_many(engine, 2_500, Status.COMPLETED)
    await age(engine, Status.COMPLETED, timedelta(days=8), limit=2_490)
    await seed_many(engine, 40, Status.FAILED)
    await age(engine, Status.FAILED, timedelta(days=31), limit=30)
    await age(engine, Status.FAILED, timedelta(days=10))
    await seed_many(engine, 5, Status.DEAD_LETTER)
    await age(engine, Status.DEAD_LETTER, timedelta(days=400))
    for live in (Status.PENDING, Status.PROCESSING):
        await seed_many(engine, 5, live)
        await age(engine, live, timedelta(days=400))
    batches: list[tuple[Status, int]] = []
    metrics = Metrics()

    def report(status: Status, count: int) -> None:
        batches.append((status, count))
        metrics.jobs_pruned(status, count)

    retention = RetentionLoop(PostgresJobStore(engine), RetentionPolicy(), TICK, on_pruned=report)

    assert await retention.run_once() == {
        Status.COMPLETED: 2_490,
        Status.FAILED: 30,
        Status.CANCELLED: 0,
    }

    assert batches == [
        (Status.COMPLETED, 1_000),
        (Status.COMPLETED, 1_000),
        (Status.COMPLETED, 490),
        (Status.FAILED, 30),
    ]
    assert await counts(engine) == {
        Status.COMPLETED: 10,
        Status.FAILED: 10,
        Status.DEAD_LETTER: 5,
        Status.PENDING: 5,
        Status.PROCESSING: 5,
    }
    pruned = metrics.registry.get_sample_value
    assert pruned("jobs_pruned_total", {"status": "completed"}) == 2_490
    assert pruned("jobs_pruned_total", {"status": "failed"}) == 30


async def test_processes_pruning_at_once_share_the_backlog(engine: AsyncEngine) -> None:
    await seed_many(engine, 3_000, Status.COMPLETED)
    await age(engine, Status.COMPLETED, timedelta(days=8))
    policy = RetentionPolicy(completed=timedelta(days=7))
    loops = [
        RetentionLoop(PostgresJobStore(engine), policy, TICK, batch_size=100) for _ in range(3)
    ]

    results = await asyncio.gather(*(loop.run_once() for loop in loops))

    # SKIP LOCKED: every row deleted once, by whichever pruner locked it first; and a pass
    # that stopped on a short batch left nothing behind that the others did not delete.
    assert sum(result[Status.COMPLETED] for result in results) == 3_000
    assert await counts(engine) == {}


@pytest.mark.slow
async def test_a_worker_process_prunes_old_finished_jobs(
    engine: AsyncEngine, database_url: str, tmp_path: Path
) -> None:
    await seed_many(engine, 3, Status.COMPLETED)
    await age(engine, Status.COMPLETED, timedelta(hours=2))
    await seed_many(engine, 1, Status.DEAD_LETTER)
    await age(engine, Status.DEAD_LETTER, timedelta(days=400))
    worker = start(
        ["worker"], free_port(), tmp_path, DATABASE_URL=database_url, RETENTION_COMPLETED="1h"
    )
    try:
        deadline = time.monotonic() + 90
        while Status.COMPLETED in await counts(engine):
            assert worker.process.poll() is None, worker.errors()
            assert time.monotonic() < deadline, "the worker pruned nothing within 90s"
            await asyncio.sleep(0.1)
    finally:
        worker.stop()

    assert worker.process.returncode == 0, worker.errors()
    [pruned] = [line for line in worker.log() if line["message"] == "jobs pruned"]
    assert pruned["by_status"] == {"completed": 3, "failed": 0, "cancelled": 0}
    assert await counts(engine) == {Status.DEAD_LETTER: 1}
