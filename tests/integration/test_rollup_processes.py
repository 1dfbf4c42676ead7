"""Two real `jobqueue worker` processes drain one queue together and are stopped as soon
as the last job completed: the rollup then holds every attempt once, whichever process
ran it, their flushes (every few seconds, and the last at SIGTERM) adding up in the same
rows."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy import text

from jobqueue import NewJob, enqueue_many
from jobqueue.adapters.postgres.database import create_engine
from tests.support.processes import STARTUP_DEADLINE, free_port, start, until, wait_for_log

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("engine")]

JOBS = 600


async def _query(database_url: str, sql: str) -> list[tuple[object, ...]]:
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as connection:
            return [tuple(row) for row in (await connection.execute(text(sql))).all()]
    finally:
        await engine.dispose()


async def _submit(database_url: str) -> None:
    engine = create_engine(database_url, pool_size=1)
    try:
        news = [
            NewJob.build(type="sleep", payload={"duration": "5ms"}, default_max_attempts=1)
            for _ in range(JOBS)
        ]
        async with engine.begin() as connection:
            await enqueue_many(connection, news)
    finally:
        await engine.dispose()


def _counted(database_url: str) -> tuple[int, int]:
    [(completed, picked)] = asyncio.run(
        _query(
            database_url,
            "SELECT coalesce(sum(completed), 0), coalesce(sum(picked), 0) FROM job_rollup"
            " WHERE queue = 'default'",
        )
    )
    return _number(completed), _number(picked)


def _completed(database_url: str) -> int:
    [(count,)] = asyncio.run(
        _query(database_url, "SELECT count(*) FROM jobs WHERE status = 'completed'")
    )
    return _number(count)


def _number(value: object) -> int:
    """A count or a sum as PostgreSQL answered it (a sum of bigints is a numeric)."""
    assert isinstance(value, int | Decimal), value
    return int(value)


def test_two_workers_flushes_add_up_to_every_attempt_once(
    database_url: str, tmp_path: Path
) -> None:
    workers = [
        start(["worker"], free_port(), tmp_path / name, DATABASE_URL=database_url)
        for name in ("first", "second")
    ]
    try:
        for worker in workers:
            wait_for_log(worker, "listening for new jobs", STARTUP_DEADLINE)
        asyncio.run(_submit(database_url))
        until(lambda: _completed(database_url) == JOBS, "every job completed")
    finally:
        # At once: the counts of the last few seconds are still in the processes, and
        # only their flush at SIGTERM brings them in.
        for worker in workers:
            worker.stop()

    assert [worker.process.returncode for worker in workers] == [0, 0], workers[0].errors()
    ran_by = asyncio.run(
        _query(database_url, "SELECT count(DISTINCT worker) FROM jobs WHERE status = 'completed'")
    )
    assert ran_by == [(2,)], "both processes ran jobs, so both flushed counts"
    assert _counted(database_url) == (JOBS, JOBS)
