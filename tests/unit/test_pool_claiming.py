"""When the pool claims, how much, and how many attempts it runs at once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from datetime import timedelta
from typing import Any

import pytest

from jobqueue.domain.flow import Claimed
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.status import Status
from jobqueue.entrypoints.worker import dispatch
from jobqueue.entrypoints.worker import pool as pool_module
from jobqueue.entrypoints.worker.claim_sizing import AHEAD_PER_WORKER, MAX_CLAIMS_IN_FLIGHT
from tests.fakes import InMemoryJobStore, wall_clock
from tests.support.recorded_claims import ClaimRecordingStore, SlowClaimStore
from tests.unit.pool_harness import config, eventually, make_pool, running, settled, submit


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


async def test_pool_claims_at_most_the_prefetch_ahead_and_starts_jobs_as_workers_free() -> None:
    store = ClaimRecordingStore()
    registry = Registry()
    pool = make_pool(store, registry, config(workers=3))
    store.pool = pool
    started_while_free: list[bool] = []

    @registry.handler("work")
    async def work(ctx: JobContext, payload: Any) -> None:
        # Uneven lengths, counted in event-loop turns, so workers free up in varying numbers.
        for _ in range(hash(ctx.job_id) % 5):
            await asyncio.sleep(0)

    jobs = [await submit(store, "work") for _ in range(40)]
    async with running(pool):
        for job in jobs:
            await settled(store, job)
            started_while_free.append(pool.in_flight <= 3)

    most = (1 + AHEAD_PER_WORKER) * 3
    assert len(store.claims) >= 40 // most
    for limit, in_flight, ahead in store.claims:
        assert limit >= 1
        # Never more than the prefetch's most claimed beyond the workers.
        assert in_flight + ahead + limit <= most
        # A claimed job waits only while every worker is busy.
        assert ahead == 0 or in_flight == 3
    assert all(started_while_free)


class OverlapRecordingStore(SlowClaimStore):
    """Counts the claims on their way at once, and what they may bring together."""

    def __init__(self, claim_seconds: float) -> None:
        super().__init__(claim_seconds)
        self.out: list[int] = []  # the limits of the claims on their way
        self.peak = 0
        self.most_held = 0

    async def claim(
        self, limit: int, lease: timedelta, queue: str = "default", *, types: Collection[str]
    ) -> Claimed:
        assert self.pool is not None
        self.out.append(limit)
        self.peak = max(self.peak, len(self.out))
        held = self.pool.in_flight + self.pool.claimed_ahead + sum(self.out)
        self.most_held = max(self.most_held, held)
        try:
            return await super().claim(limit, lease, queue, types=types)
        finally:
            self.out.remove(limit)


async def test_long_jobs_are_claimed_only_for_free_workers_one_claim_at_a_time() -> None:
    store = OverlapRecordingStore(claim_seconds=0.002)
    registry = Registry()
    pool = make_pool(store, registry, config(workers=2))
    store.pool = pool

    @registry.handler("long")
    async def long(ctx: JobContext, payload: Any) -> None:
        # A hundred claims' time (margin for a loaded machine's slow timers): claiming
        # ahead would only hold jobs.
        await asyncio.sleep(0.2)

    jobs = [await submit(store, "long") for _ in range(8)]
    async with running(pool):
        for job in jobs:
            await settled(store, job)

    # Never more than the free workers, nothing ahead. (At most: the store sees the
    # workers running when the claim arrives, and one may finish between the pool's
    # decision and then.)
    assert store.claims[0] == (2, 0, 0)
    assert all(limit + in_flight <= 2 and ahead == 0 for limit, in_flight, ahead in store.claims)
    assert store.peak == 1


async def test_short_jobs_are_claimed_ahead_so_a_freed_worker_need_not_wait_for_a_claim() -> None:
    store = SlowClaimStore(claim_seconds=0.01)
    registry = Registry()
    pool = make_pool(store, registry, config(workers=2))
    store.pool = pool
    waiting_ahead: list[int] = []

    @registry.handler("short")
    async def short(ctx: JobContext, payload: Any) -> None:
        # As long as a claim: two workers finish two jobs while one is out, so the pool
        # claims ahead (even if a loaded machine doubles this sleep).
        await asyncio.sleep(0.01)
        # Sampled as the worker is about to free up, while it still holds its slot: a job
        # claimed ahead is waiting for it then. (At the start, a depth of one has just been
        # taken by this very job; a loaded machine's slow timers make that depth common.)
        waiting_ahead.append(pool.claimed_ahead)

    # Enough jobs that a machine loaded by other tests still shows the pool a few claims
    # and jobs of comparable length.
    jobs = [await submit(store, "short") for _ in range(60)]
    async with running(pool):
        for job in jobs:
            await settled(store, job)

    # Once the pool has measured a few, it claims while both workers are busy.
    assert any(limit >= 1 and in_flight == 2 for limit, in_flight, _ in store.claims)
    # And a job claimed so waits for the first worker to free up, no round trip.
    assert max(waiting_ahead) >= 1


async def test_when_the_round_trip_limits_the_pool_two_claims_are_on_their_way_at_once() -> None:
    store = OverlapRecordingStore(claim_seconds=0.01)
    registry = Registry()
    pool = make_pool(store, registry, config(workers=4))
    store.pool = pool

    @registry.handler("short")
    async def short(ctx: JobContext, payload: Any) -> None:
        pass

    jobs = [await submit(store, "short") for _ in range(300)]
    async with running(pool):
        for job in jobs:
            await settled(store, job)

    assert store.peak == MAX_CLAIMS_IN_FLIGHT == 2
    # Together they never bring more than one claim may hold: no job is held longer.
    assert store.most_held <= (1 + AHEAD_PER_WORKER) * 4


async def test_a_wake_up_from_idle_sends_one_claim_though_a_backlog_may_send_two() -> None:
    store = OverlapRecordingStore(claim_seconds=0.01)
    registry = Registry()
    pool = make_pool(store, registry, config(workers=4, poll_interval=timedelta(hours=1)))
    store.pool = pool

    @registry.handler("short")
    async def short(ctx: JobContext, payload: Any) -> None:
        pass

    backlog = [await submit(store, "short") for _ in range(300)]
    async with running(pool):
        for job in backlog:
            await settled(store, job)
        # A backlog may send a second claim while one is out (whether it does depends on
        # timing: on a loaded machine it may not), never more.
        assert store.peak <= 2
        await eventually(lambda: not store.out, "the pool is idle")
        store.peak = 0
        for _ in range(5):
            job = await submit(store, "short")
            pool.wake()
            await settled(store, job)

    # Each job announced alone was claimed by one claim: a second beside it would only
    # have raced it for the same row.
    assert store.peak == 1


async def test_a_job_claimed_ahead_that_no_worker_takes_in_time_is_given_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The hold, and the dispatcher's wait bounded by it.
    monkeypatch.setattr(pool_module, "PREFETCH_HOLD_SECONDS", 0.05)
    monkeypatch.setattr(dispatch, "PREFETCH_HOLD_SECONDS", 0.05)
    store = SlowClaimStore(claim_seconds=0.005)
    registry = Registry()
    release = asyncio.Event()
    pool = make_pool(store, registry, config(workers=1))
    store.pool = pool

    # One type, so that the blocker is claimed before the job behind it (types take
    # turns within a priority).
    @registry.handler("short")
    async def short(ctx: JobContext, payload: Any) -> None:
        if payload.get("block"):
            await release.wait()

    # Short jobs teach the pool to claim one ahead; then one blocks the only worker while
    # the job claimed behind it waits.
    shorts = [await submit(store, "short") for _ in range(6)]
    async with running(pool):
        for job in shorts:
            await settled(store, job)
        blocker = await submit(store, "short", {"block": True})
        behind = await submit(store, "short")
        pool.wake()
        await eventually(
            lambda: any(job.id == behind.id and job.lease_token > 0 for job in store.jobs()),
            "the job behind the blocker is claimed ahead",
        )
        given_back: list[Any] = []

        def released() -> bool:
            # One snapshot: the pool may claim the job again right after.
            now = next(job for job in store.jobs() if job.id == behind.id)
            if now.status is Status.PENDING:
                given_back.append(now)
            return bool(given_back)

        await eventually(released, "the job claimed ahead is given back")
        assert given_back[0].attempts == 0  # a release gives the attempt back
        release.set()
        await settled(store, blocker)
        await settled(store, behind)


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
    caplog.set_level(logging.WARNING, logger="jobqueue.worker")
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
    # An outage says what failed, without a traceback per poll.
    for record in failures:
        assert record.levelno == logging.WARNING
        assert record.exc_info is None
        assert getattr(record, "error", "") == "ConnectionResetError: connection reset by peer"


async def test_unavailable_store_does_not_stop_the_pool(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="jobqueue.worker")
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
