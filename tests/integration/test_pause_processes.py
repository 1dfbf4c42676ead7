"""A queue paused while three `jobqueue worker` processes consume it: within a second
every one of them has stopped claiming (one of them without notifications, so by its
polling alone), nothing submitted meanwhile is claimed, and on resume they take it all.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import func, select

from jobqueue import NewJob, enqueue_many
from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.schema import jobs
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.status import Status
from tests.support.processes import Service, free_port, start, until

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("engine")]

QUEUE = "paused.q"
BATCH = 30


async def _enqueue(database_url: str) -> None:
    engine = create_engine(database_url, pool_size=1)
    try:
        news = [
            NewJob.build(type="sleep", payload={"duration": "1ms"}, queue=QUEUE)
            for _ in range(BATCH)
        ]
        await enqueue_many(engine, news)
    finally:
        await engine.dispose()


async def _statuses(database_url: str) -> dict[str, int]:
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as connection:
            rows = await connection.execute(
                select(jobs.c.status, func.count()).group_by(jobs.c.status)
            )
            return {status: count for status, count in rows}
    finally:
        await engine.dispose()


async def _set_paused(database_url: str, paused: bool) -> None:
    engine = create_engine(database_url, pool_size=1)
    try:
        store = PostgresJobStore(engine)
        if paused:
            await store.pause_queue(QUEUE)
        else:
            await store.resume_queue(QUEUE)
    finally:
        await engine.dispose()


def _logged_at(worker: Service, message: str) -> list[float]:
    return [
        datetime.fromisoformat(record["ts"]).timestamp()
        for record in worker.log()
        if record["message"].startswith(message) and record.get("queue") == QUEUE
    ]


@pytest.mark.direct_database(
    "two of the workers LISTEN, which holds a session PgBouncer's transaction mode cannot keep"
)
def test_a_paused_queue_claims_nothing_in_any_of_three_processes_within_a_second_and_resumes(
    database_url: str, tmp_path: Path
) -> None:
    workers = [
        start(
            ["worker", "--queue", f"{QUEUE}=2"],
            free_port(),
            tmp_path / f"worker{n}",
            DATABASE_URL=database_url,
            POLL_INTERVAL="200ms",
            # The third hears of nothing: polling alone must tell it.
            NOTIFY="false" if n == 2 else "true",
        )
        for n in range(3)
    ]
    try:
        until(
            lambda: all(
                any(r["message"] == "jobqueue worker running" for r in w.log()) for w in workers
            ),
            "the three workers run",
        )
        asyncio.run(_enqueue(database_url))
        until(
            lambda: asyncio.run(_statuses(database_url)) == {Status.COMPLETED: BATCH},
            "the first batch is done",
        )

        asyncio.run(_set_paused(database_url, True))
        paused_at = time.time()
        asyncio.run(_enqueue(database_url))
        # Past the one-second bound, and several polls.
        time.sleep(1.5)

        assert asyncio.run(_statuses(database_url)) == {
            Status.COMPLETED: BATCH,
            Status.PENDING: BATCH,
        }
        for worker in workers:
            assert worker.process.poll() is None, worker.errors()
            (heard,) = _logged_at(worker, "queue paused")
            assert heard - paused_at <= 1.0

        asyncio.run(_set_paused(database_url, False))
        resumed_at = time.time()
        until(
            lambda: asyncio.run(_statuses(database_url)) == {Status.COMPLETED: 2 * BATCH},
            "the second batch is done after the resume",
        )
        # The other two may have taken it all before the third polled again.
        until(
            lambda: all(_logged_at(worker, "queue resumed") for worker in workers),
            "every worker resumed",
            within=10,
        )
        for worker in workers:
            (heard,) = _logged_at(worker, "queue resumed")
            assert heard - resumed_at <= 1.0
    finally:
        for worker in workers:
            worker.stop()
