"""A job every second, scheduled by three `jobqueue worker` processes at once and no
leader: over 30 s, exactly one job per slot, each due at its slot and run once."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path

import pytest
from sqlalchemy import select

from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.schema import jobs
from tests.integration.periodic_handlers import MODULE
from tests.support.processes import free_port, start

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("engine")]

WATCHED_SECONDS = 30


async def _periodic_rows(database_url: str) -> list[tuple[datetime, str, int]]:
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as connection:
            rows = await connection.execute(
                select(jobs.c.run_at, jobs.c.status, jobs.c.attempts)
                .where(jobs.c.type == "tick")
                .order_by(jobs.c.run_at)
            )
            return [tuple(row) for row in rows]
    finally:
        await engine.dispose()


def test_three_processes_make_exactly_one_job_per_slot(database_url: str, tmp_path: Path) -> None:
    workers = [
        start(
            ["worker", "--handlers", MODULE],
            free_port(),
            tmp_path / f"worker{n}",
            DATABASE_URL=database_url,
            POLL_INTERVAL="200ms",
        )
        for n in range(3)
    ]
    try:
        deadline = time.monotonic() + 60
        while not all(
            any(r["message"] == "jobqueue worker running" for r in w.log()) for w in workers
        ):
            assert time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.1)
        started = datetime.now().astimezone()
        time.sleep(WATCHED_SECONDS)
        ended = datetime.now().astimezone()
        for worker in workers:
            assert worker.process.poll() is None, worker.errors()
    finally:
        for worker in workers:
            worker.stop()

    rows = asyncio.run(_periodic_rows(database_url))
    slots = [run_at for run_at, _, _ in rows]
    assert len(slots) == len(set(slots)), "two jobs for one slot"
    watched = [
        (run_at, status, attempts)
        for run_at, status, attempts in rows
        if started + timedelta(seconds=1) <= run_at <= ended - timedelta(seconds=1)
    ]
    # One job for each second of the window, every one of them run once.
    seconds = [run_at for run_at, _, _ in watched]
    assert len(seconds) >= WATCHED_SECONDS - 3
    assert all(b - a == timedelta(seconds=1) for a, b in pairwise(seconds))
    assert {(status, attempts) for _, status, attempts in watched} == {("completed", 1)}
    # Every process scheduled some of them: no leader.
    scheduled = [
        sum(r["message"] == "periodic job scheduled" for r in worker.log()) for worker in workers
    ]
    assert sum(scheduled) == len(rows)
