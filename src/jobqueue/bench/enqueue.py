"""Enqueue throughput in-process: one job per `enqueue(engine, …)` call, and many jobs per
transaction."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from jobqueue import NewJob, enqueue, enqueue_many
from jobqueue.bench.progress import progress
from jobqueue.bench.results import Stopwatch, Throughput


async def enqueue_one_per_call(
    engine: AsyncEngine, new: NewJob, total: int, submitters: int, label: str
) -> Throughput:
    """`submitters` concurrent tasks calling `jobqueue.enqueue(engine, new)` (one statement
    in autocommit per job, and the coalesced wake-up) until `total` jobs exist."""
    # Untimed: opens each submitter's connection and prepares the statement on it.
    await asyncio.gather(*(enqueue(engine, new) for _ in range(submitters)))
    tickets = iter(range(total))  # shared: each submitter takes the next job to send

    async with progress(label, total) as shown:

        async def submitter() -> None:
            for _ in tickets:
                await enqueue(engine, new)
                shown.advance()

        stopwatch = Stopwatch()
        await asyncio.gather(*(submitter() for _ in range(submitters)))
        return stopwatch.throughput(total)


async def enqueue_in_batches(
    engine: AsyncEngine, new: NewJob, total: int, batch: int, label: str
) -> Throughput:
    """`jobqueue.enqueue` called `batch` times per transaction: the in-process API."""

    async def send(connection: AsyncConnection, size: int) -> None:
        for _ in range(size):
            await enqueue(connection, new)

    return await _in_transactions(engine, total, batch, label, send)


async def enqueue_many_in_batches(
    engine: AsyncEngine, new: NewJob, total: int, batch: int, label: str
) -> Throughput:
    """`jobqueue.enqueue_many` of `batch` jobs per transaction: the bulk in-process API."""

    async def send(connection: AsyncConnection, size: int) -> None:
        await enqueue_many(connection, [new] * size)

    return await _in_transactions(engine, total, batch, label, send)


async def _in_transactions(
    engine: AsyncEngine,
    total: int,
    batch: int,
    label: str,
    send: Callable[[AsyncConnection, int], Awaitable[None]],
) -> Throughput:
    """`total` jobs, `batch` per transaction, each transaction's jobs sent by `send`."""
    async with progress(label, total) as shown:
        stopwatch = Stopwatch()
        for first in range(0, total, batch):
            size = min(batch, total - first)
            async with engine.begin() as connection:
                await send(connection, size)
            shown.advance(size)
        return stopwatch.throughput(total)
