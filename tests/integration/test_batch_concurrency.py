"""Batches of 1,000 sent at once with the same keys, over HTTP to a real `jobqueue api` and
in-process with `enqueue_many`: every key ends with exactly one job, and every batch is
answered with that job."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue import NewJob, Unique, enqueue_many
from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.schema import jobs
from tests.support.processes import Service, free_port, start

BATCHES = 4
# Jobs per batch: a thousand, of the largest batch allowed (`MAX_BATCH_JOBS`).
MAX_BATCH_JOBS = 1_000


async def _keys_and_rows(engine: AsyncEngine) -> tuple[int, int]:
    async with engine.connect() as connection:
        row = (
            await connection.execute(
                select(func.count(), func.count(func.distinct(jobs.c.idempotency_key)))
            )
        ).one()
    return int(row[0]), int(row[1])


def _batch(first: int) -> list[dict[str, Any]]:
    """`MAX_BATCH_JOBS` jobs whose keys overlap those of the batch starting elsewhere: batch i
    holds keys i*250 ... i*250+999, so neighbours share three quarters of them."""
    return [
        {"type": "sleep", "payload": {"duration": "1ms"}, "idempotency_key": f"k-{n}"}
        for n in range(first, first + MAX_BATCH_JOBS)
    ]


@pytest.fixture
def api(database_url: str, tmp_path: Path) -> Iterator[Service]:
    running = start(["api"], free_port(), tmp_path, DATABASE_URL=database_url)
    try:
        running.wait_until_healthy()
        yield running
    finally:
        running.stop()


@pytest.mark.slow
async def test_concurrent_http_batches_with_shared_keys_make_one_job_per_key(
    engine: AsyncEngine, api: Service
) -> None:
    async with httpx.AsyncClient(base_url=api.base_url, timeout=60) as client:
        answers = await asyncio.gather(
            *(client.post("/jobs/batch", json={"jobs": _batch(i * 250)}) for i in range(BATCHES))
        )

    by_key: dict[str, str] = {}
    for answer in answers:
        assert answer.status_code in (200, 201), answer.text
        for job in answer.json()["jobs"]:
            assert by_key.setdefault(job["idempotency_key"], job["id"]) == job["id"]
    distinct = MAX_BATCH_JOBS + (BATCHES - 1) * 250
    assert len(by_key) == distinct
    assert await _keys_and_rows(engine) == (distinct, distinct)


async def test_concurrent_in_process_batches_with_shared_keys_make_one_job_per_key(
    engine: AsyncEngine, database_url: str
) -> None:
    own = create_engine(database_url, pool_size=BATCHES)
    unique = Unique(key="one-report")
    try:

        async def batch(i: int) -> list[Any]:
            news = [
                NewJob.build(
                    type="sleep", payload=each["payload"], idempotency_key=each["idempotency_key"]
                )
                for each in _batch(i * 250)
            ]
            # And one job per batch under one unique key: one of them holds it.
            news.append(NewJob.build(type="report", payload={"by": i}, unique=unique))
            async with own.begin() as connection:
                return await enqueue_many(connection, news)

        results = await asyncio.gather(*(batch(i) for i in range(BATCHES)))
    finally:
        await own.dispose()

    by_key: dict[str | None, Any] = {}
    for submitted in results:
        for each in submitted[:-1]:
            assert by_key.setdefault(each.job.idempotency_key, each.job.id) == each.job.id
    holders = {submitted[-1].job.id for submitted in results}
    assert len(holders) == 1
    assert sum(not submitted[-1].duplicate for submitted in results) == 1
    distinct = MAX_BATCH_JOBS + (BATCHES - 1) * 250
    # Every keyed job once, and the one unique report (no idempotency key).
    assert await _keys_and_rows(engine) == (distinct + 1, distinct)
