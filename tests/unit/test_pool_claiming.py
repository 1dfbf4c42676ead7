"""When the pool claims, how much, and how many attempts it runs at once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from jobqueue.domain.job import Job
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.status import Status
from jobqueue.entrypoints.worker.pool import WorkerPool
from tests.fakes import InMemoryJobStore, wall_clock
from tests.unit.pool_harness import config, eventually, make_pool, running, settled, submit


class ClaimRecordingStore(InMemoryJobStore):
    """Records every claim together with what the pool was doing when it was made."""

    def __init__(self) -> None:
        super().__init__(wall_clock)
        self.pool: WorkerPool | None = None
        self.claims: list[tuple[int, int, int]] = []  # (limit, in_flight, claimed unstarted)
        self.unstarted: set[Any] = set()
        self.failures_left = 0

    async def claim(self, limit: int, lease: timedelta) -> Sequence[Job]:
        assert self.pool is not None
        self.claims.append((limit, self.pool.in_flight, len(self.unstarted)))
        if self.failures_left:
            self.failures_left -= 1
            raise ConnectionResetError("connection reset by peer")
        jobs = await super().claim(limit, lease)
        self.unstarted.update(job.id for job in jobs)
        return jobs


async def test_pool_never_runs_more_than_workers_attempts_at_once() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()
    running_now = 0
    peak = 0
    full = asyncio.Event()

    @registry.handler("work")
    async def work(ctx: JobContext, payload: Any) -> None:
        nonlocal running_now, peak
        running_now += 1
        peak = max(peak, running_now)
        if running_now == 3:
            full.set()
        # Every attempt holds its worker until all three are busy at once, so the pool
        # has every chance to start a fourth if it would.
        await full.wait()
        await asyncio.sleep(0)
        running_now -= 1

    jobs = [await submit(store, "work") for _ in range(12)]
    async with running(make_pool(store, registry, config(workers=3))):
        for job in jobs:
            await settled(store, job)

    assert peak == 3


async def test_pool_claims_only_for_free_workers_and_starts_what_it_claims_at_once() -> None:
    store = ClaimRecordingStore()
    registry = Registry()
    pool = make_pool(store, registry, config(workers=3))
    store.pool = pool

    @registry.handler("work")
    async def work(ctx: JobContext, payload: Any) -> None:
        store.unstarted.discard(ctx.job_id)
        # Uneven lengths, counted in event-loop turns, so slots free up in varying numbers.
        for _ in range(hash(ctx.job_id) % 5):
            await asyncio.sleep(0)

    jobs = [await submit(store, "work") for _ in range(20)]
    async with running(pool):
        for job in jobs:
            await settled(store, job)

    assert len(store.claims) >= 7  # 20 jobs, at most 3 a claim
    for limit, in_flight, unstarted in store.claims:
        assert limit == 3 - in_flight
        assert limit >= 1
        assert unstarted == 0


async def test_full_batch_is_followed_by_another_claim_without_waiting_for_the_poll() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()

    @registry.handler("work")
    async def work(ctx: JobContext, payload: Any) -> None:
        pass

    jobs = [await submit(store, "work") for _ in range(7)]
    # An hour's poll: only the "claim again while batches come back full" rule can
    # finish all seven jobs within the test's deadline.
    pool = make_pool(store, registry, config(workers=2, poll_interval=timedelta(hours=1)))
    async with running(pool):
        for job in jobs:
            await settled(store, job)


async def test_idle_pool_claims_at_once_when_woken() -> None:
    store = ClaimRecordingStore()
    registry = Registry()
    pool = make_pool(store, registry, config(poll_interval=timedelta(hours=1)))
    store.pool = pool

    @registry.handler("work")
    async def work(ctx: JobContext, payload: Any) -> None:
        pass

    async with running(pool):
        await eventually(lambda: len(store.claims) == 1, "the pool found the queue empty")
        job = await submit(store, "work")
        pool.wake()
        done = await settled(store, job)

    assert done.status is Status.COMPLETED
    assert len(store.claims) == 2


async def test_claim_errors_are_logged_and_retried_without_stopping_the_pool(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="jobqueue.worker")
    store = ClaimRecordingStore()
    store.failures_left = 3
    registry = Registry()
    pool = make_pool(store, registry)
    store.pool = pool

    @registry.handler("work")
    async def work(ctx: JobContext, payload: Any) -> None:
        pass

    job = await submit(store, "work")
    async with running(pool):
        done = await settled(store, job)

    assert done.status is Status.COMPLETED
    failures = [r for r in caplog.records if r.getMessage().startswith("claiming jobs failed")]
    assert len(failures) == 3
    assert all(r.exc_info is not None for r in failures)


async def test_unavailable_store_does_not_stop_the_pool(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="jobqueue.worker")
    store = InMemoryJobStore(wall_clock)
    store.available = False
    registry = Registry()

    @registry.handler("work")
    async def work(ctx: JobContext, payload: Any) -> None:
        pass

    def failed_claims() -> int:
        return sum(r.getMessage().startswith("claiming jobs failed") for r in caplog.records)

    pool = make_pool(store, registry)
    async with running(pool) as pool_task:
        await eventually(lambda: failed_claims() >= 2, "the pool has polled a dead store")
        assert not pool_task.done()
        store.available = True
        done = await settled(store, await submit(store, "work"))

    assert done.status is Status.COMPLETED
