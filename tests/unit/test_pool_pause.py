"""A paused pool claims nothing, gives back what it claimed ahead, lets running attempts
finish, and claims again at once when resumed; `QueuePauses` keeps each pool as the
store says."""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from datetime import timedelta
from typing import Any

from jobqueue.adapters.telemetry.metrics import Metrics
from jobqueue.domain.flow import Claimed
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.status import Status
from jobqueue.entrypoints.worker.pauses import QueuePauses
from tests.fakes import InMemoryJobStore, wall_clock
from tests.support.recorded_claims import SlowClaimStore
from tests.unit.pool_harness import config, eventually, make_pool, running, settled, submit


async def test_a_paused_pool_claims_nothing_and_its_running_attempt_finishes() -> None:
    store = SlowClaimStore(claim_seconds=0)
    registry = Registry()
    pool = make_pool(store, registry, config(workers=1))
    store.pool = pool
    release = asyncio.Event()

    @registry.handler("blocking")
    async def blocking(ctx: JobContext, payload: Any) -> None:
        await release.wait()

    @registry.handler("short")
    async def short(ctx: JobContext, payload: Any) -> None:
        pass

    async with running(pool):
        blocker = await submit(store, "blocking")
        await settled(store, blocker, Status.PROCESSING)
        pool.pause()
        claims_at_pause = len(store.claims)
        waiting = [await submit(store, "short") for _ in range(3)]
        release.set()
        await settled(store, blocker)
        # Woken and past many poll intervals (5 ms): still nothing claimed.
        for _ in range(5):
            pool.wake()
            await asyncio.sleep(0.02)
        assert len(store.claims) == claims_at_pause
        assert {job.status for job in store.jobs() if job.id != blocker.id} == {Status.PENDING}

        pool.resume()
        for job in waiting:
            await settled(store, job)
    assert (await store.get(blocker.id)).status is Status.COMPLETED


async def test_pausing_gives_back_the_jobs_claimed_ahead_unstarted() -> None:
    store = SlowClaimStore(claim_seconds=0.005)
    registry = Registry()
    metrics = Metrics()
    pool = make_pool(store, registry, config(workers=1), observer=metrics)
    store.pool = pool
    release = asyncio.Event()
    started: list[str] = []

    # One type, so that the blocker is claimed before the job behind it (types take
    # turns within a priority).
    @registry.handler("short")
    async def short(ctx: JobContext, payload: Any) -> None:
        if payload.get("block"):
            await release.wait()
        else:
            started.append("short")

    # Short jobs teach the pool to claim ahead; then one blocks the only worker while
    # the job claimed behind it waits.
    shorts = [await submit(store, "short") for _ in range(6)]
    async with running(pool):
        for job in shorts:
            await settled(store, job)
        blocker = await submit(store, "short", {"block": True})
        behind = await submit(store, "short")
        pool.wake()
        await eventually(lambda: pool.claimed_ahead == 1, "the job behind is claimed ahead")
        ran_before = len(started)

        pool.pause()

        assert pool.claimed_ahead == 0
        given_back = await settled(store, behind, Status.PENDING)
        # Given back with its attempt: it never started, so it waited for no pickup (the
        # six short jobs and the blocker did) and no attempt of it ended.
        assert given_back.attempts == 0
        labels = {"queue": "default", "type": "short"}
        pickups = metrics.registry.get_sample_value("job_pickup_latency_seconds_count", labels)
        assert pickups == 7
        released = {**labels, "outcome": "released"}
        durations = metrics.registry.get_sample_value(
            "job_processing_duration_seconds_count", released
        )
        assert durations == 0
        release.set()
        await settled(store, blocker)
        await asyncio.sleep(0.05)
        assert len(started) == ran_before
        assert (await store.get(behind.id)).status is Status.PENDING
        pool.resume()
        await settled(store, behind)


class GatedClaimStore(InMemoryJobStore):
    """Claims that wait at a gate before reading the store."""

    def __init__(self) -> None:
        super().__init__(wall_clock)
        self.entered = 0
        self.gate = asyncio.Event()

    async def claim(
        self, limit: int, lease: timedelta, queue: str = "default", *, types: Collection[str]
    ) -> Claimed:
        self.entered += 1
        await self.gate.wait()
        return await super().claim(limit, lease, queue, types=types)


async def test_a_claim_on_its_way_at_the_pause_gives_its_jobs_back_when_it_returns() -> None:
    store = GatedClaimStore()
    registry = Registry()
    pool = make_pool(store, registry, config(workers=2))
    ran: list[int] = []

    @registry.handler("short")
    async def short(ctx: JobContext, payload: Any) -> None:
        ran.append(1)

    job = await submit(store, "short")
    async with running(pool):
        await eventually(lambda: store.entered == 1, "a claim is on its way")
        pool.pause()
        store.gate.set()
        await eventually(
            lambda: (
                (now := next(x for x in store.jobs() if x.id == job.id)).lease_token == 1
                and now.status is Status.PENDING
            ),
            "the job the claim brought is given back",
        )
        assert ran == []
        assert (await store.get(job.id)).attempts == 0
        assert store.entered == 1


class Switch:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def pause(self) -> None:
        self.calls.append("pause")

    def resume(self) -> None:
        self.calls.append("resume")

    def wake(self) -> None:
        self.calls.append("wake")


async def test_queue_pauses_follow_the_store_on_start_on_a_change_and_at_every_interval() -> None:
    store = InMemoryJobStore(wall_clock)
    a, b = Switch(), Switch()
    await store.pause_queue("a")
    # An interval no test waits for: only start and changed() may read the store.
    pauses = QueuePauses(store, {"a": a, "b": b}, interval=timedelta(hours=1))
    task = asyncio.create_task(pauses.run())
    try:
        await eventually(lambda: bool(a.calls and b.calls), "the first read")
        assert (a.calls, b.calls) == (["pause"], ["resume"])

        await store.resume_queue("a")
        await store.pause_queue("b")
        await asyncio.sleep(0.01)
        assert (a.calls[-1], b.calls[-1]) == ("pause", "resume")  # nobody told it yet
        pauses.changed()
        await eventually(lambda: a.calls[-1] == "resume", "a resumed")
        assert b.calls[-1] == "pause"
    finally:
        pauses.stop()
        await asyncio.wait_for(task, 5)


async def test_queue_pauses_are_reread_unasked_and_kept_while_the_store_is_away() -> None:
    store = InMemoryJobStore(wall_clock)
    a = Switch()
    pauses = QueuePauses(store, {"a": a}, interval=timedelta(milliseconds=5))
    task = asyncio.create_task(pauses.run())
    try:
        await eventually(lambda: a.calls == ["resume"], "the first read")
        await store.pause_queue("a")
        await eventually(lambda: a.calls[-1] == "pause", "the pause read without a notice")
        store.available = False
        seen = len(a.calls)
        await asyncio.sleep(0.05)
        assert len(a.calls) == seen
        store.available = True
        await store.resume_queue("a")
        await eventually(lambda: a.calls[-1] == "resume", "read again once the store is back")
    finally:
        pauses.stop()
        await asyncio.wait_for(task, 5)
