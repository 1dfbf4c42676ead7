"""Shared pieces of the pool's unit tests: a fast configuration, a way to run a pool in
the background, and polling with a deadline instead of sleeping."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import timedelta
from typing import Any

from jobqueue.domain.backoff import Backoff
from jobqueue.domain.fields import JsonValue
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.registry import Registry
from jobqueue.domain.status import Status
from jobqueue.entrypoints.worker.observer import PoolObserver
from jobqueue.entrypoints.worker.pool import WorkerPool
from jobqueue.entrypoints.worker.pool_config import PoolConfig
from tests.fakes import DataclassDecoder, InMemoryJobStore

# Milliseconds everywhere, except the limits a passing test never reaches.
FAST = PoolConfig(
    workers=2,
    job_timeout=timedelta(seconds=30),
    lease_duration=timedelta(minutes=5),
    poll_interval=timedelta(milliseconds=5),
    shutdown_timeout=timedelta(seconds=30),
    outcome_timeout=timedelta(seconds=30),
    backoff=Backoff(timedelta(milliseconds=1), timedelta(milliseconds=8)),
)
DEADLINE_SECONDS = 20.0


def config(**changes: Any) -> PoolConfig:
    return replace(FAST, **changes)


def make_pool(
    store: InMemoryJobStore,
    registry: Registry,
    pool_config: PoolConfig = FAST,
    *,
    observer: PoolObserver | None = None,
    rand: Callable[[], float] | None = None,
) -> WorkerPool:
    extra: dict[str, Any] = {} if rand is None else {"rand": rand}
    return WorkerPool(store, registry, DataclassDecoder(), pool_config, observer=observer, **extra)


async def submit(
    store: InMemoryJobStore, type: str, payload: JsonValue = None, *, max_attempts: int = 3
) -> Job:
    new = NewJob(type=type, max_attempts=max_attempts, payload={} if payload is None else payload)
    return (await store.submit(new)).job


async def eventually(condition: Callable[[], bool], what: str) -> None:
    """Poll `condition` until it holds; fail after a generous deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_SECONDS
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        await asyncio.sleep(0.001)


async def settled(store: InMemoryJobStore, job: Job, *statuses: Status) -> Job:
    """The job once it reaches one of `statuses` (default: any terminal or dead_letter)."""
    wanted = statuses or (Status.COMPLETED, Status.FAILED, Status.DEAD_LETTER)
    current = job

    def reached() -> bool:
        nonlocal current
        current = next(j for j in store.jobs() if j.id == job.id)
        return current.status in wanted

    await eventually(reached, f"job {job.id} is {'/'.join(wanted)}")
    return current


@asynccontextmanager
async def running(pool: WorkerPool) -> AsyncIterator[asyncio.Task[None]]:
    """Run `pool` in the background; stop it and wait for it on the way out."""
    task = asyncio.create_task(pool.run())
    try:
        yield task
    finally:
        pool.stop()
        await asyncio.wait_for(task, DEADLINE_SECONDS)
