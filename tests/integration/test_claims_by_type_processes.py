"""A `jobqueue serve` without a job type's handler, consuming that type's queue, never
claims its jobs (it used to, and failed them as unknown types); they run as soon as a
`jobqueue worker` that has the handler starts."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue import NewJob, enqueue_many
from tests.integration.ways_in_handlers import MODULE, registry
from tests.support.processes import free_port, start, until

pytestmark = [pytest.mark.slow]

JOBS = 5


async def _states(engine: AsyncEngine) -> list[tuple[str, int]]:
    async with engine.connect() as connection:
        rows = await connection.execute(
            text("SELECT status, attempts FROM jobs WHERE type = 'plain' ORDER BY id")
        )
        return [(row[0], row[1]) for row in rows]


async def test_a_serve_without_a_type_s_handler_leaves_its_jobs_to_a_worker_that_has_it(
    engine: AsyncEngine, database_url: str, tmp_path: Path
) -> None:
    # The serve runs the built-in types only, on the queue the `plain` jobs wait in.
    serve = start(
        ["serve"], free_port(), tmp_path / "serve", DATABASE_URL=database_url, POLL_INTERVAL="100ms"
    )
    worker = None
    try:
        serve.wait_until_healthy()
        news = [NewJob.build(type="plain") for _ in range(JOBS)]
        async with engine.begin() as connection:
            await enqueue_many(connection, news, registry=registry)
        # Sleep jobs enqueued after them, which the serve runs one after another: each
        # finished one is a claim that passed over the `plain` jobs (no sleep standing in
        # for "many polls later").
        for finished in range(1, 4):
            async with engine.begin() as connection:
                await enqueue_many(
                    connection, [NewJob.build(type="sleep", payload={"duration": "1ms"})]
                )
            await asyncio.to_thread(
                until,
                lambda n=finished: sum(r["message"] == "job finished" for r in serve.log()) >= n,
                "the serve runs the job it has a handler for",
            )
        # The others are as they were stored: never claimed, no attempt.
        assert await _states(engine) == [("pending", 0)] * JOBS
        assert not [r for r in serve.log() if r.get("job_type") == "plain"]

        worker = start(
            ["worker", "--handlers", MODULE],
            free_port(),
            tmp_path / "worker",
            DATABASE_URL=database_url,
            METRICS_ADDR="off",
            POLL_INTERVAL="100ms",
        )

        async def all_done() -> bool:
            return await _states(engine) == [("completed", 1)] * JOBS

        deadline = asyncio.get_running_loop().time() + 60
        while not await all_done():
            assert asyncio.get_running_loop().time() < deadline, await _states(engine)
            await asyncio.sleep(0.1)
    finally:
        for process in (serve, worker):
            if process is not None:
                process.stop()
