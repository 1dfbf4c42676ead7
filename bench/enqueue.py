"""Enqueue throughput: one job per `submit` call, and many jobs per transaction."""

from __future__ import annotations

import asyncio

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from bench.progress import progress
from bench.results import Stopwatch, Throughput
from jobqueue import enqueue
from jobqueue.adapters.postgres.schema import jobs
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.job import NewJob


async def submit_one_per_call(
    engine: AsyncEngine, new: NewJob, total: int, submitters: int, label: str
) -> Throughput:
    """`submitters` concurrent tasks calling `PostgresJobStore.submit`, one transaction
    per job, until `total` jobs exist."""
    store = PostgresJobStore(engine)
    # Untimed: opens each submitter's connection and prepares the statement on it.
    await asyncio.gather(*(store.submit(new) for _ in range(submitters)))
    tickets = iter(range(total))  # shared: each submitter takes the next job to send

    async with progress(label, total) as shown:

        async def submitter() -> None:
            for _ in tickets:
                await store.submit(new)
                shown.advance()

        stopwatch = Stopwatch()
        await asyncio.gather(*(submitter() for _ in range(submitters)))
        return stopwatch.throughput(total)


async def enqueue_in_batches(
    engine: AsyncEngine, new: NewJob, total: int, batch: int, label: str
) -> Throughput:
    """`jobqueue.enqueue` called `batch` times per transaction: the in-process API."""
    async with progress(label, total) as shown:
        stopwatch = Stopwatch()
        for first in range(0, total, batch):
            size = min(batch, total - first)
            async with engine.begin() as connection:
                for _ in range(size):
                    await enqueue(connection, new)
            shown.advance(size)
        return stopwatch.throughput(total)


async def multi_row_insert(
    engine: AsyncEngine, new: NewJob, total: int, batch: int, label: str
) -> Throughput:
    """Reference only, not a store API: one multi-row INSERT per `batch` jobs, to show
    what a bulk enqueue could gain over a statement per job."""
    row = {"type": new.type, "payload": new.payload, "max_attempts": new.max_attempts}
    async with progress(label, total) as shown:
        stopwatch = Stopwatch()
        for first in range(0, total, batch):
            size = min(batch, total - first)
            async with engine.begin() as connection:
                await connection.execute(insert(jobs).values([row] * size))
            shown.advance(size)
        return stopwatch.throughput(total)
