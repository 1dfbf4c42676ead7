"""A worker process's pools claim only once its declared limits are written: a pool that
claimed at once could take a limited queue's jobs before its limits were in the queue's
row (under load, two processes started 40 jobs of a queue limited to 20 a second)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from jobqueue.domain.flow import QueueLimits
from jobqueue.domain.queues import QueueState
from jobqueue.entrypoints.service.queue_limits import AfterDeclaration, LimitsDeclaration


class _Store:
    """Declares once `open` is set; fails before."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.failed_twice = asyncio.Event()
        self.failures = 0
        self.declared: list[str] = []

    async def declare_queue_limits(self, queue: str, limits: QueueLimits) -> QueueState:
        if not self.open.is_set():
            self.failures += 1
            if self.failures >= 2:
                self.failed_twice.set()
            raise ConnectionError("the database is away")
        self.declared.append(queue)
        return QueueState(queue, None, limits)


class _Pool:
    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.stopped = asyncio.Event()

    async def run(self) -> None:
        self.started.set()
        await self.stopped.wait()

    def stop(self) -> None:
        self.stopped.set()


async def test_a_pool_starts_claiming_once_the_limits_are_written() -> None:
    store = _Store()
    declaration = LimitsDeclaration(
        store,  # type: ignore[arg-type]
        {"emails": QueueLimits(rate=None, concurrency=2)},
        retry_every=timedelta(milliseconds=10),
    )
    pool = _Pool()
    declaring = asyncio.create_task(declaration.run())
    running = asyncio.create_task(AfterDeclaration(pool, declaration).run())
    # Declarations failing, again and again: the pool waits.
    await asyncio.wait_for(store.failed_twice.wait(), timeout=5)
    assert not pool.started.is_set()
    store.open.set()
    await asyncio.wait_for(pool.started.wait(), timeout=5)
    assert store.declared == ["emails"]
    pool.stop()
    declaration.stop()
    await asyncio.gather(running, declaring)


async def test_a_pool_stopped_before_the_limits_are_written_never_starts() -> None:
    store = _Store()
    declaration = LimitsDeclaration(store, {"emails": QueueLimits(concurrency=2)})  # type: ignore[arg-type]
    pool = _Pool()
    waiting = AfterDeclaration(pool, declaration)
    running: asyncio.Task[Any] = asyncio.create_task(waiting.run())
    await asyncio.sleep(0)
    waiting.stop()
    await asyncio.wait_for(running, timeout=5)
    assert not pool.started.is_set()
    assert pool.stopped.is_set()
