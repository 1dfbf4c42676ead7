"""What the tests of in-process enqueueing share: a job to enqueue, and the notifications
on the workers' channel (a fixture, imported by name) with a count of those that arrive."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from jobqueue.adapters.postgres.notify import CHANNEL
from jobqueue.domain.job import NewJob
from tests.support.postgres import dsn


def job(n: int, key: str | None = None) -> NewJob:
    return NewJob.build(
        type="email", payload={"n": n, "to": f"{n}@example.com"}, idempotency_key=key
    )


@pytest.fixture
async def notifications(database_url: str) -> AsyncIterator[asyncio.Queue[str]]:
    """Every notification on the workers' channel, as it arrives."""
    received: asyncio.Queue[str] = asyncio.Queue()
    listener = await asyncpg.connect(dsn(database_url))
    await listener.add_listener(CHANNEL, lambda *args: received.put_nowait(args[2]))
    try:
        yield received
    finally:
        await listener.close()


async def arrived(queue: asyncio.Queue[str], wait: float = 0.5) -> int:
    """How many notifications arrive within `wait` seconds."""
    await asyncio.sleep(wait)
    count = 0
    while not queue.empty():
        queue.get_nowait()
        count += 1
    return count
