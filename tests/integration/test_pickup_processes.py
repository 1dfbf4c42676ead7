"""A job enqueued in-process (`jobqueue.enqueue` on the producer's engine) is picked up by
a separate, idle `jobqueue worker` within milliseconds: its commit's NOTIFY wakes the
worker, whose poll is 30 s away.

Pickup is read from the job's own row, both ends on the database clock: `created_at`
(the insert) to `started_at` (the claim). The issue's bound is a p99 of 50 ms; a test
machine running other tests beside this one can stall any process for longer now and
then, so the bound must hold in one of a few rounds, each of 100 jobs. A lost wake-up
costs the 30 s poll, so a broken path fails every round by far.
"""

from __future__ import annotations

import asyncio
import statistics
from pathlib import Path

import pytest
from sqlalchemy import select

from jobqueue import NewJob, enqueue
from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.schema import jobs
from tests.support.processes import STARTUP_DEADLINE, free_port, start, wait_for_log

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("engine")]

ROUNDS = 3
JOBS_PER_ROUND = 100
# Apart enough that each job finds the worker idle, as a producer's requests would.
SPACING_SECONDS = 0.02
P99_BOUND_MS = 50.0


async def _round(database_url: str) -> list[float]:
    """Pickup of `JOBS_PER_ROUND` jobs, one enqueued at a time, in milliseconds."""
    engine = create_engine(database_url, pool_size=2)
    try:
        ids = []
        for _ in range(JOBS_PER_ROUND):
            new = NewJob.build(type="sleep", payload={"duration": "1ms"})
            ids.append((await enqueue(engine, new)).job.id)
            await asyncio.sleep(SPACING_SECONDS)
        deadline = asyncio.get_running_loop().time() + 60
        while True:
            async with engine.connect() as connection:
                rows = (
                    await connection.execute(
                        select(jobs.c.created_at, jobs.c.started_at).where(jobs.c.id.in_(ids))
                    )
                ).all()
            if all(started is not None for _, started in rows):
                break
            assert asyncio.get_running_loop().time() < deadline, "jobs were not picked up"
            await asyncio.sleep(0.1)
        return [(started - created).total_seconds() * 1000 for created, started in rows]
    finally:
        await engine.dispose()


def _p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[98]


@pytest.mark.direct_database(
    "LISTEN holds a session, which PgBouncer's transaction mode cannot keep"
)
def test_an_in_process_enqueue_is_picked_up_by_an_idle_worker_within_50ms_at_p99(
    database_url: str, tmp_path: Path
) -> None:
    worker = start(
        ["worker"], free_port(), tmp_path, DATABASE_URL=database_url, POLL_INTERVAL="30s"
    )
    try:
        wait_for_log(worker, "listening for new jobs", STARTUP_DEADLINE)
        p99s = []
        for _ in range(ROUNDS):
            samples = asyncio.run(_round(database_url))
            p99s.append(_p99(samples))
            if p99s[-1] <= P99_BOUND_MS:
                break
    finally:
        worker.stop()
    assert worker.process.returncode == 0, worker.errors()
    assert min(p99s) <= P99_BOUND_MS, f"pickup p99 per round: {p99s} ms"
