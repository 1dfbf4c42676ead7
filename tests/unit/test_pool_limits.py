"""A pool under a queue's limits (the in-memory store keeps them as PostgreSQL does): a
claim the rate (or a key's, or a type's) cut short rests until the rate's window opens, not for the
poll interval, nor until a wake-up; one that running jobs' slots cut short rests until
one of the pool's own jobs ends; claims held back are reported to the observer."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from jobqueue.domain.flow import Limit, QueueLimits, Rate, type_rates
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.status import Status
from jobqueue.entrypoints.worker.observer import NullObserver
from jobqueue.entrypoints.worker.pool import WorkerPool
from tests.fakes import InMemoryJobStore, wall_clock
from tests.unit.pool_harness import config, eventually, make_pool, running, settled, submit

PERIOD = timedelta(milliseconds=200)


async def _limited(
    store: InMemoryJobStore, limits: QueueLimits, key: str | None, count: int
) -> list[Job]:
    """`count` jobs of type "work" with partition key `key`, in a queue under `limits`."""
    await store.set_queue_limits("default", limits)
    new = NewJob(type="work", max_attempts=3, payload={}, partition_key=key)
    return [(await store.submit(new)).job for _ in range(count)]


def _hour_poll_pool(
    store: InMemoryJobStore, registry: Registry, workers: int, observer: NullObserver
) -> WorkerPool:
    return make_pool(
        store,
        registry,
        config(workers=workers, poll_interval=timedelta(hours=1)),
        observer=observer,
    )


class HeldBack(NullObserver):
    def __init__(self) -> None:
        self.seen: list[tuple[str, frozenset[Limit]]] = []

    def claim_held_back(self, queue: str, limits: frozenset[Limit]) -> None:
        self.seen.append((queue, limits))


@pytest.mark.parametrize(
    ("limits", "key", "held"),
    [
        (QueueLimits(rate=Rate(2, PERIOD)), None, Limit.RATE),
        (QueueLimits(key_rate=Rate(2, PERIOD)), "k", Limit.KEY_RATE),
        (QueueLimits(type_rates=type_rates({"work": Rate(2, PERIOD)})), None, Limit.TYPE_RATE),
    ],
)
async def test_a_rate_limited_pool_claims_again_when_the_window_opens(
    limits: QueueLimits, key: str | None, held: Limit
) -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()

    @registry.handler("work")
    async def work(ctx: JobContext, payload: Any) -> None:
        pass

    jobs = await _limited(store, limits, key, 6)
    observer = HeldBack()
    # An hour's poll and no wake-up: only resting until the window opens finishes them.
    pool = _hour_poll_pool(store, registry, 4, observer)
    async with running(pool):
        done = [await settled(store, job) for job in jobs]

    assert {job.status for job in done} == {Status.COMPLETED}
    starts = sorted(job.started_at for job in done if job.started_at is not None)
    assert all(
        sum(1 for other in starts if start <= other < start + PERIOD) <= 2 for start in starts
    )
    assert ("default", frozenset({held})) in observer.seen


async def test_a_concurrency_limit_caps_a_pool_with_more_workers() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()
    most = 0

    @registry.handler("work")
    async def work(ctx: JobContext, payload: Any) -> None:
        nonlocal most
        most = max(most, pool.in_flight)

    await store.set_queue_limits("default", QueueLimits(concurrency=2))
    jobs = [await submit(store, "work") for _ in range(10)]
    pool = make_pool(store, registry, config(workers=8, poll_interval=timedelta(milliseconds=5)))
    async with running(pool):
        for job in jobs:
            await settled(store, job)
    assert most <= 2


@pytest.mark.parametrize(
    ("limits", "key", "held"),
    [
        (QueueLimits(concurrency=2), None, Limit.CONCURRENCY),
        (QueueLimits(key_concurrency=2), "k", Limit.KEY_CONCURRENCY),
    ],
)
async def test_a_pool_held_back_by_slots_claims_again_as_its_own_jobs_end(
    limits: QueueLimits, key: str | None, held: Limit
) -> None:
    """An hour's poll and no wake-up: only claiming again as each of its jobs ends (that
    job's slot is free) runs all of a queue limited to 2 running, or 2 running per key."""
    store = InMemoryJobStore(wall_clock)
    registry = Registry()
    release = asyncio.Event()

    @registry.handler("work")
    async def work(ctx: JobContext, payload: Any) -> None:
        await release.wait()

    jobs = await _limited(store, limits, key, 8)
    observer = HeldBack()
    pool = _hour_poll_pool(store, registry, 8, observer)
    async with running(pool):
        # Two start; the claim behind them comes back short and the pool rests.
        await eventually(lambda: bool(observer.seen), "a claim was held back")
        release.set()
        done = [await settled(store, job) for job in jobs]
    assert {job.status for job in done} == {Status.COMPLETED}
    assert ("default", frozenset({held})) in observer.seen
