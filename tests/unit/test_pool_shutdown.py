"""Graceful shutdown: finish what runs, claim nothing new, give back what cannot finish."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Collection, Sequence
from datetime import timedelta
from typing import Any

import pytest

from jobqueue.domain.attempts import Outcome
from jobqueue.domain.flow import Claimed
from jobqueue.domain.job import Job, Lease
from jobqueue.domain.outcome import Decision
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.status import Status
from jobqueue.entrypoints.worker.pool import WorkerPool
from tests.fakes import InMemoryJobStore, RecordingObserver, wall_clock
from tests.unit.pool_harness import DEADLINE_SECONDS, config, eventually, make_pool, submit


class GatedStore(InMemoryJobStore):
    """Counts claims; can hold `claim` or `complete` until a test opens their gate."""

    def __init__(self) -> None:
        super().__init__(wall_clock)
        self.claims = 0
        self.hold_claims = False
        self.claim_entered = asyncio.Event()
        self.claim_gate = asyncio.Event()
        self.hold_completes = False
        self.complete_entered = asyncio.Event()
        self.complete_gate = asyncio.Event()

    async def claim(
        self, limit: int, lease: timedelta, queue: str = "default", *, types: Collection[str]
    ) -> Claimed:
        self.claims += 1
        if self.hold_claims:
            self.claim_entered.set()
            await self.claim_gate.wait()
        return await super().claim(limit, lease, queue, types=types)

    async def record_many(self, endings: Sequence[tuple[Lease, Decision]]) -> set[Lease]:
        if self.hold_completes and any(d.outcome is Outcome.COMPLETED for _, d in endings):
            self.complete_entered.set()
            await self.complete_gate.wait()
        return await super().record_many(endings)


async def _one_attempt_running() -> tuple[GatedStore, Job, WorkerPool, asyncio.Task[None]]:
    """A pool running one job's attempt that blocks for good, in its `run()` task."""
    store = GatedStore()
    entered: list[int] = []
    job = await submit(store, "block")
    pool = make_pool(store, blocking_registry(asyncio.Event(), entered))
    task = asyncio.create_task(pool.run())
    await eventually(lambda: entered == [1], "the attempt runs")
    return store, job, pool, task


async def _cancelled_and_released(task: asyncio.Task[None], store: GatedStore, job: Job) -> None:
    """Cancel the pool's `run()` (`task`): it re-raises, and `job`'s attempt was given back."""
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, DEADLINE_SECONDS)

    released = next(j for j in store.jobs() if j.id == job.id)
    assert (released.status, released.attempts) == (Status.PENDING, 0)


def blocking_registry(gate: asyncio.Event, entered: list[int]) -> Registry:
    registry = Registry()

    @registry.handler("block")
    async def block(ctx: JobContext, payload: Any) -> None:
        entered.append(ctx.attempt)
        await gate.wait()

    return registry


async def test_stop_lets_running_attempts_finish_and_claims_nothing_more() -> None:
    store = GatedStore()
    gate = asyncio.Event()
    entered: list[int] = []
    for _ in range(4):
        await submit(store, "block")
    pool = make_pool(store, blocking_registry(gate, entered), config(workers=2))

    task = asyncio.create_task(pool.run())
    await eventually(lambda: len(entered) == 2, "both workers are busy")
    pool.stop()
    claims_at_stop = store.claims
    gate.set()
    await asyncio.wait_for(task, DEADLINE_SECONDS)

    assert store.claims == claims_at_stop
    states = Counter((j.status, j.attempts) for j in store.jobs())
    assert states == {(Status.COMPLETED, 1): 2, (Status.PENDING, 0): 2}


async def test_attempts_still_running_at_the_shutdown_timeout_are_released(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="jobqueue.worker")
    store = GatedStore()
    observer = RecordingObserver()
    entered: list[int] = []
    cancelled: list[int] = []
    registry = Registry()

    @registry.handler("hang")
    async def hang(ctx: JobContext, payload: Any) -> None:
        entered.append(ctx.attempt)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(ctx.attempt)
            raise

    job = await submit(store, "hang", max_attempts=1)
    pool = make_pool(
        store,
        registry,
        config(shutdown_timeout=timedelta(milliseconds=10)),
        observer=observer,
    )
    task = asyncio.create_task(pool.run())
    await eventually(lambda: entered == [1], "the attempt runs")
    pool.stop()
    await asyncio.wait_for(task, DEADLINE_SECONDS)

    released = next(j for j in store.jobs() if j.id == job.id)
    # The attempt is given back: with max_attempts=1 the job may still run once more.
    assert (released.status, released.attempts) == (Status.PENDING, 0)
    assert cancelled == [1]
    assert [(j.id, d) for j, d, _ in observer.finished] == [(job.id, Decision.release())]
    outcomes = [getattr(r, "outcome", None) for r in caplog.records if r.msg == "job finished"]
    assert outcomes == ["released"]


async def test_outcome_write_completes_even_if_shutdown_cancels_during_it() -> None:
    store = GatedStore()
    store.hold_completes = True
    registry = Registry()

    @registry.handler("quick")
    async def quick(ctx: JobContext, payload: Any) -> None:
        pass

    job = await submit(store, "quick")
    pool = make_pool(store, registry, config(shutdown_timeout=timedelta(0)))
    task = asyncio.create_task(pool.run())
    await asyncio.wait_for(store.complete_entered.wait(), DEADLINE_SECONDS)
    pool.stop()
    # The shutdown gives up on the attempt at once and cancels it mid-write...
    await eventually(lambda: pool.in_flight == 0, "the attempt was cancelled")
    for _ in range(5):
        await asyncio.sleep(0)
    # ...but run() still waits for the write, which then lands.
    assert not task.done()
    store.complete_gate.set()
    await asyncio.wait_for(task, DEADLINE_SECONDS)

    done = next(j for j in store.jobs() if j.id == job.id)
    assert (done.status, done.attempts) == (Status.COMPLETED, 1)


async def test_cancelling_run_releases_running_attempts_before_it_ends() -> None:
    store, job, _, task = await _one_attempt_running()
    await _cancelled_and_released(task, store, job)


async def test_job_claimed_while_stopping_is_given_back_unstarted() -> None:
    store = GatedStore()
    store.hold_claims = True
    entered: list[int] = []
    job = await submit(store, "block")
    pool = make_pool(store, blocking_registry(asyncio.Event(), entered))

    task = asyncio.create_task(pool.run())
    await asyncio.wait_for(store.claim_entered.wait(), DEADLINE_SECONDS)
    pool.stop()
    store.claim_gate.set()
    await asyncio.wait_for(task, DEADLINE_SECONDS)

    released = next(j for j in store.jobs() if j.id == job.id)
    assert (released.status, released.attempts, released.lease_token) == (Status.PENDING, 0, 1)
    assert entered == []


async def test_stop_before_run_returns_without_claiming() -> None:
    store = GatedStore()
    await submit(store, "block")
    pool = make_pool(store, blocking_registry(asyncio.Event(), []))

    pool.stop()
    pool.stop()  # idempotent
    await asyncio.wait_for(pool.run(), DEADLINE_SECONDS)

    assert store.claims == 0


async def test_idle_pool_stops_without_waiting_for_its_poll_interval() -> None:
    store = GatedStore()
    registry = Registry()

    @registry.handler("idle")
    async def idle(ctx: JobContext, payload: Any) -> None:
        pass

    pool = make_pool(store, registry, config(poll_interval=timedelta(hours=1)))

    task = asyncio.create_task(pool.run())
    await eventually(lambda: store.claims == 1, "the pool went idle")
    pool.stop()
    await asyncio.wait_for(task, DEADLINE_SECONDS)


async def test_cancelling_run_during_the_grace_period_releases_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="jobqueue.worker")
    store, job, pool, task = await _one_attempt_running()  # 30 s grace
    pool.stop()
    await eventually(
        lambda: any(r.getMessage().startswith("stopping:") for r in caplog.records),
        "the pool waits for its running attempt",
    )
    await _cancelled_and_released(task, store, job)


class CarryHoldingStore(InMemoryJobStore):
    """Claims that take a round trip, and the first claim carrying endings held for good."""

    def __init__(self) -> None:
        super().__init__(wall_clock)
        self.carried: list[Lease] = []
        self.carry_entered = asyncio.Event()

    async def claim(
        self, limit: int, lease: timedelta, queue: str = "default", *, types: Collection[str]
    ) -> Claimed:
        await asyncio.sleep(0.005)
        return await super().claim(limit, lease, queue, types=types)

    async def record_and_claim(
        self,
        endings: Sequence[tuple[Lease, Decision]],
        limit: int,
        lease: timedelta,
        queue: str = "default",
        *,
        types: Collection[str],
    ) -> tuple[set[Lease], Claimed]:
        if not self.carry_entered.is_set():
            self.carried = [lease for lease, _ in endings]
            self.carry_entered.set()
            await asyncio.Event().wait()
        return await super().record_and_claim(endings, limit, lease, queue, types=types)


async def test_cancelling_run_while_a_claim_carries_outcomes_still_writes_them() -> None:
    store = CarryHoldingStore()
    registry = Registry()

    @registry.handler("quick")
    async def quick(ctx: JobContext, payload: Any) -> None:
        pass

    for _ in range(40):
        await submit(store, "quick")
    task = asyncio.create_task(make_pool(store, registry).run())
    await asyncio.wait_for(store.carry_entered.wait(), DEADLINE_SECONDS)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, DEADLINE_SECONDS)

    # The claim was cancelled on its way: the writer took its endings back and wrote
    # them before run() ended.
    carried = {lease.job_id for lease in store.carried}
    assert carried
    done = [job for job in store.jobs() if job.id in carried]
    assert {(job.status, job.attempts) for job in done} == {(Status.COMPLETED, 1)}


async def test_cancelling_run_while_an_empty_claim_is_on_its_way_still_releases() -> None:
    # A forced shutdown landing while a claim carrying nothing is on its way: the writer
    # had been told a claim would carry the next endings, and none ever comes. The
    # release of the cancelled attempt must be written anyway (it once waited for good).
    store, job, pool, task = await _one_attempt_running()
    store.hold_claims = True
    pool.wake()
    await asyncio.wait_for(store.claim_entered.wait(), DEADLINE_SECONDS)
    await _cancelled_and_released(task, store, job)
