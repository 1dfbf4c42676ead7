"""A cancel heard by the pool stops the attempt running the job, writes nothing over the
cancellation, and tells the handler why; a handler's `Snooze` (raised or returned) sends
the job back for later without using up an attempt, within MAX_SNOOZES."""

from __future__ import annotations

import asyncio
import logging
import threading
from datetime import timedelta
from typing import Any
from uuid import uuid4

import pytest

from jobqueue.domain.outcome import Snooze
from jobqueue.domain.registry import JobContext, Registry, StopReason
from jobqueue.domain.status import Status
from jobqueue.entrypoints.worker.cancels import CancelRouter
from tests.fakes import InMemoryJobStore, RecordingObserver, wall_clock
from tests.unit.pool_harness import config, eventually, make_pool, running, settled, submit


async def test_a_cancel_stops_the_running_handler_and_nothing_is_written_after_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()
    observer = RecordingObserver()
    started, stopped = asyncio.Event(), asyncio.Event()
    reasons: list[StopReason | None] = []

    @registry.handler("long")
    async def long(ctx: JobContext, payload: Any) -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            reasons.append(ctx.stop.reason)
            assert ctx.job_cancelled
            stopped.set()
            raise

    pool = make_pool(store, registry, config(workers=2), observer=observer)
    router = CancelRouter([pool])
    caplog.set_level(logging.INFO, "jobqueue.worker")
    async with running(pool):
        job = await submit(store, "long")
        await asyncio.wait_for(started.wait(), 10)
        cancelled = await store.cancel(job.id)
        assert store.cancels_announced == [job.id]
        router.heard(str(job.id))
        await asyncio.wait_for(stopped.wait(), 10)
        await eventually(lambda: pool.in_flight == 0, "the attempt has ended")
        # Its slot is free again: the pool runs the next job.
        other = await submit(store, "long")
        await eventually(lambda: len(observer.started) == 2, "the next job started")
        await store.cancel(other.id)
        router.heard(str(other.id))
    assert reasons == [StopReason.CANCELLED, StopReason.CANCELLED]
    assert await store.get(job.id) == cancelled
    assert [j.id for j in observer.cancelled] == [job.id, other.id]
    assert observer.finished == []
    assert observer.lost == []
    outcomes = [getattr(r, "outcome", None) for r in caplog.records if "finished" in r.getMessage()]
    assert outcomes == ["cancelled", "cancelled"]


async def test_a_cancel_for_a_job_this_process_does_not_hold_changes_nothing() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()
    release = asyncio.Event()

    @registry.handler("waits")
    async def waits(ctx: JobContext, payload: Any) -> None:
        await release.wait()

    pool = make_pool(store, registry, config(workers=1))
    router = CancelRouter([pool])
    async with running(pool):
        job = await submit(store, "waits")
        await settled(store, job, Status.PROCESSING)
        router.heard(str(uuid4()))
        router.heard("")  # deaf for a while: renewals find what was missed
        router.heard("not a uuid")
        release.set()
        done = await settled(store, job)
    assert done.status is Status.COMPLETED


async def test_a_sync_handler_sees_the_cancel_on_its_stop_request() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()
    entered = threading.Event()
    seen: list[StopReason | None] = []

    @registry.handler("sync")
    def sync(ctx: JobContext, payload: Any) -> None:
        entered.set()
        ctx.stop.wait(30)
        seen.append(ctx.stop.reason)

    pool = make_pool(store, registry, config(workers=1))
    async with running(pool):
        job = await submit(store, "sync")
        await asyncio.to_thread(entered.wait, 10)
        await store.cancel(job.id)
        assert pool.cancelled(job.id)
        await eventually(lambda: bool(seen), "the thread saw the stop")
        await eventually(lambda: pool.in_flight == 0, "the attempt has ended")
    assert seen == [StopReason.CANCELLED]
    assert (await store.get(job.id)).status is Status.CANCELLED


@pytest.mark.parametrize("how", ["raised", "returned"])
async def test_a_snoozed_job_waits_without_using_an_attempt(how: str) -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()
    runs: list[int] = []

    @registry.handler("not_yet")
    async def not_yet(ctx: JobContext, payload: Any) -> Snooze | None:
        runs.append(ctx.attempt)
        if len(runs) < 3:
            if how == "raised":
                raise Snooze(timedelta(milliseconds=10))
            return Snooze(0.01)
        return None

    async with running(make_pool(store, registry, config(workers=1))):
        job = await submit(store, "not_yet", max_attempts=1)
        done = await settled(store, job)
    # Every run was the first attempt: the snoozes gave theirs back.
    assert runs == [1, 1, 1]
    assert (done.status, done.attempts, done.snoozes) == (Status.COMPLETED, 1, 2)


async def test_snoozes_past_max_snoozes_use_up_attempts_until_the_job_dead_letters() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()

    @registry.handler("never_ready")
    async def never_ready(ctx: JobContext, payload: Any) -> None:
        raise Snooze(0)

    async with running(make_pool(store, registry, config(workers=1, max_snoozes=2))):
        job = await submit(store, "never_ready", max_attempts=2)
        done = await settled(store, job)
    assert (done.status, done.attempts, done.snoozes) == (Status.DEAD_LETTER, 2, 2)
    assert done.last_error == "snoozed 2 times, the most allowed (MAX_SNOOZES)"
