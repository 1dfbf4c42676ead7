"""A `jobqueue worker` consuming two queues, `--queue a=1 --queue b=3`: never more than
one `a` and three `b` attempts at once, and a backlog of `a` never holds up `b`."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import select

from jobqueue import NewJob, enqueue_many
from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.schema import jobs
from jobqueue.domain.status import Status
from tests.integration import queue_handlers
from tests.support.processes import free_port, start

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("engine")]

FLOOD = 40
B_JOBS = 12


async def _enqueue(database_url: str, job_type: str, count: int) -> None:
    engine = create_engine(database_url, pool_size=1)
    try:
        news = [
            NewJob.build(type=job_type, registered=queue_handlers.registry) for _ in range(count)
        ]
        await enqueue_many(engine, news)
    finally:
        await engine.dispose()


async def _finished(database_url: str) -> dict[str, list[tuple[str, datetime]]]:
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as connection:
            rows = await connection.execute(select(jobs.c.queue, jobs.c.status, jobs.c.updated_at))
            by_queue: dict[str, list[tuple[str, datetime]]] = defaultdict(list)
            for queue, status, updated_at in rows:
                by_queue[queue].append((status, updated_at))
            return by_queue
    finally:
        await engine.dispose()


def test_each_queue_runs_its_own_number_of_jobs_and_a_flood_of_one_never_delays_another(
    database_url: str, tmp_path: Path
) -> None:
    samples = tmp_path / "samples.txt"
    # The flood first: with one `a` at a time it takes FLOOD × 50 ms or more.
    asyncio.run(_enqueue(database_url, "on_a", FLOOD))
    asyncio.run(_enqueue(database_url, "on_b", B_JOBS))
    worker = start(
        [
            "worker",
            "--handlers",
            "tests.integration.queue_handlers",
            "--queue",
            "a=1",
            "--queue",
            "b=3",
        ],
        free_port(),
        tmp_path,
        DATABASE_URL=database_url,
        POLL_INTERVAL="100ms",
        QUEUE_SAMPLES=str(samples),
    )
    try:
        for _ in range(600):
            by_queue = asyncio.run(_finished(database_url))
            statuses = [status for rows in by_queue.values() for status, _ in rows]
            if statuses.count(Status.COMPLETED) == FLOOD + B_JOBS:
                break
            assert worker.process.poll() is None, worker.errors()
            asyncio.run(asyncio.sleep(0.1))
        else:
            raise AssertionError(f"not every job completed: {by_queue}\n{worker.errors()}")
    finally:
        worker.stop()
    assert worker.process.returncode == 0, worker.errors()

    running: dict[str, list[int]] = defaultdict(list)
    for line in samples.read_text().splitlines():
        queue, count = line.split()
        running[queue].append(int(count))
    assert len(running["a"]) == FLOOD
    assert len(running["b"]) == B_JOBS
    assert max(running["a"]) == 1
    assert max(running["b"]) <= 3
    # Not serialised behind anything either: `b` did run several at once.
    assert max(running["b"]) > 1
    # Every `b` job was done before half the flood of `a`, which was there first.
    a_done = sorted(at for _, at in by_queue["a"])
    b_done = sorted(at for _, at in by_queue["b"])
    assert b_done[-1] < a_done[len(a_done) // 2]
