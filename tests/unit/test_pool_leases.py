"""Leases that renew, and sync handlers that cannot steal capacity or their job."""

from __future__ import annotations

import asyncio
import logging
import threading
from datetime import timedelta
from functools import partial
from typing import Any

import pytest

from jobqueue.domain.job import Job
from jobqueue.domain.outcome import Decision
from jobqueue.domain.registry import JobContext, Registry, StopReason
from jobqueue.domain.status import Status
from jobqueue.entrypoints.worker.lease_recovery import LeaseRecovery
from jobqueue.entrypoints.worker.pool import WorkerPool
from tests.fakes import (
    TEST_TYPES,
    DataclassDecoder,
    InMemoryJobStore,
    RecordingObserver,
    wall_clock,
)
from tests.unit.pool_harness import (
    DEADLINE_SECONDS,
    config,
    eventually,
    make_pool,
    running,
    settled,
    submit,
)

LEASE = timedelta(milliseconds=300)


def current(store: InMemoryJobStore, job_id: object) -> Any:
    return next(job for job in store.jobs() if job.id == job_id)


def finished_outcomes(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        str(getattr(record, "outcome", None))
        for record in caplog.records
        if record.getMessage().startswith("job finished")
    ]


async def test_an_attempt_longer_than_its_lease_keeps_its_job_and_completes_first_time() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()

    @registry.handler("slow")
    async def slow(ctx: JobContext, payload: Any) -> None:
        await asyncio.sleep(LEASE.total_seconds() * 4)

    job = await submit(store, "slow")
    # Another process recovering expired leases as eagerly as it can: a lease that was
    # not renewed would be taken from the running attempt.
    recovery = LeaseRecovery(store, timedelta(milliseconds=20))
    recovering = asyncio.create_task(recovery.run())
    try:
        async with running(make_pool(store, registry, config(lease_duration=LEASE))):
            done = await settled(store, job)
    finally:
        recovery.stop()
        await recovering

    assert (done.status, done.attempts, done.lease_token) == (Status.COMPLETED, 1, 1)


async def test_a_lost_lease_stops_the_attempt_tells_the_handler_and_writes_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="jobqueue.worker")
    store = InMemoryJobStore(wall_clock)
    observer = RecordingObserver()
    registry = Registry()
    started = asyncio.Event()
    seen: list[tuple[bool, bool]] = []

    @registry.handler("long")
    async def long(ctx: JobContext, payload: Any) -> None:
        started.set()
        try:
            await asyncio.sleep(DEADLINE_SECONDS)
        except asyncio.CancelledError:
            seen.append((ctx.cancelled, ctx.lease_lost))
            raise

    job = await submit(store, "long")
    pool = make_pool(store, registry, config(lease_duration=LEASE), observer=observer)
    async with running(pool):
        await asyncio.wait_for(started.wait(), DEADLINE_SECONDS)
        # Another process takes the job over: its lease recovered, the job claimed again.
        held = current(store, job.id)
        await InMemoryJobStore.record_many(store, [(held.lease, Decision.release())])
        [taken] = await store.claim(1, timedelta(minutes=5), types=TEST_TYPES)
        await eventually(lambda: seen != [], "the attempt hears its lease was lost")
        await eventually(lambda: pool.in_flight == 0, "the attempt ends")

    assert seen == [(True, True)]
    assert [each.id for each in observer.lost] == [job.id]
    # The other owner's claim is untouched: no outcome was written over it.
    assert current(store, job.id) == taken
    assert "lease_lost" in finished_outcomes(caplog)


async def test_a_lease_no_renewal_reaches_in_time_stops_the_attempt() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()
    started = asyncio.Event()
    reasons: list[StopReason | None] = []

    @registry.handler("long")
    async def long(ctx: JobContext, payload: Any) -> None:
        started.set()
        try:
            await asyncio.sleep(DEADLINE_SECONDS)
        except asyncio.CancelledError:
            reasons.append(ctx.stop.reason)
            raise

    job = await submit(store, "long")
    pool = make_pool(store, registry, config(lease_duration=LEASE))
    async with running(pool):
        await asyncio.wait_for(started.wait(), DEADLINE_SECONDS)
        store.available = False  # the database is gone: no renewal gets through
        await eventually(lambda: reasons != [], "the attempt is stopped")
        await eventually(lambda: pool.in_flight == 0, "the attempt ends")
        store.available = True

    assert reasons == [StopReason.LEASE_LOST]
    # Nothing was written for it: the job waits for lease recovery elsewhere.
    assert current(store, job.id).status is Status.PROCESSING


def stuck_sync_registry(release: threading.Event, stops: list[StopReason | None]) -> Registry:
    registry = Registry()

    @registry.handler("stuck")
    def stuck(ctx: JobContext, payload: Any) -> None:
        # Ignores ctx.stop, as a blocked call would; returns only when released.
        release.wait(DEADLINE_SECONDS)
        stops.append(ctx.stop.reason)

    return registry


async def test_stuck_sync_handlers_keep_their_slots_and_burn_no_attempts() -> None:
    store = InMemoryJobStore(wall_clock)
    release = threading.Event()
    stops: list[StopReason | None] = []
    # One attempt each: a timed-out attempt that went back to pending could otherwise be
    # claimed again once released, and run a second time with no stop asked.
    stuck = [await submit(store, "stuck", max_attempts=1) for _ in range(2)]
    waiting = await submit(store, "stuck")
    pool = make_pool(
        store,
        stuck_sync_registry(release, stops),
        config(workers=2, job_timeout=timedelta(milliseconds=50), lease_duration=LEASE),
    )

    def left_processing(job: Job) -> bool:
        latest = current(store, job.id)
        return latest.attempts >= 1 and latest.status is not Status.PROCESSING

    async with running(pool):
        await eventually(
            lambda: all(current(store, job.id).status is Status.PROCESSING for job in stuck),
            "both stuck jobs run",
        )
        # Well past the timeout and several lease lengths: still theirs, nothing more taken.
        await asyncio.sleep(LEASE.total_seconds() * 3)
        assert pool.in_flight == 2
        assert [current(store, job.id).attempts for job in stuck] == [1, 1]
        assert current(store, waiting.id).status is Status.PENDING
        release.set()
        # Once the threads return, their timed-out attempts are recorded and the slot
        # they held takes the waiting job.
        for job in [*stuck, waiting]:
            await eventually(partial(left_processing, job), f"job {job.id} leaves processing")

    # The two stuck ones were asked to stop by their timeout; the waiting one, which
    # ran after them (released at once, in any order), never was.
    assert sorted(str(reason) for reason in stops) == ["None", "timeout", "timeout"]
    assert all(current(store, job.id).status is Status.DEAD_LETTER for job in stuck)
    assert all(current(store, job.id).last_error.startswith("attempt timed out") for job in stuck)


async def test_shutdown_never_releases_a_job_whose_thread_still_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="jobqueue.worker")
    store = InMemoryJobStore(wall_clock)
    release = threading.Event()
    stops: list[StopReason | None] = []
    job = await submit(store, "stuck")
    pool = make_pool(
        store,
        stuck_sync_registry(release, stops),
        config(shutdown_timeout=timedelta(0), outcome_timeout=timedelta(milliseconds=100)),
    )

    task = asyncio.create_task(pool.run())
    await eventually(lambda: current(store, job.id).status is Status.PROCESSING, "the job runs")
    pool.stop()
    await asyncio.wait_for(task, DEADLINE_SECONDS)
    release.set()

    # Not released: it stays processing under its lease, for recovery to take.
    left = current(store, job.id)
    assert (left.status, left.attempts) == (Status.PROCESSING, 1)
    assert "abandoned" in finished_outcomes(caplog)


async def test_a_sync_handler_that_heeds_the_stop_request_is_released_at_shutdown() -> None:
    store = InMemoryJobStore(wall_clock)
    started = threading.Event()
    registry = Registry()

    @registry.handler("polite")
    def polite(ctx: JobContext, payload: Any) -> None:
        started.set()
        # Sleeping on the stop request, as the README suggests for sync handlers.
        ctx.stop.wait(DEADLINE_SECONDS)

    job = await submit(store, "polite")
    pool = make_pool(store, registry, config(shutdown_timeout=timedelta(0)))
    task = asyncio.create_task(pool.run())
    await eventually(started.is_set, "the handler runs")
    pool.stop()
    await asyncio.wait_for(task, DEADLINE_SECONDS)

    released = current(store, job.id)
    assert (released.status, released.attempts) == (Status.PENDING, 0)


async def test_shutdown_gives_up_on_a_thread_already_past_its_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Asked to stop by the timeout first, then by the shutdown: the shutdown's bound still
    # applies, and the pool drains instead of waiting for the thread for good.
    caplog.set_level(logging.INFO, logger="jobqueue.worker")
    store = InMemoryJobStore(wall_clock)
    release = threading.Event()
    stops: list[StopReason | None] = []
    job = await submit(store, "stuck")
    pool = make_pool(
        store,
        stuck_sync_registry(release, stops),
        config(
            job_timeout=timedelta(milliseconds=20),
            shutdown_timeout=timedelta(0),
            outcome_timeout=timedelta(milliseconds=100),
        ),
    )

    task = asyncio.create_task(pool.run())
    await eventually(
        lambda: any("asked to stop (timeout)" in r.getMessage() for r in caplog.records),
        "the timeout asks the thread to stop",
    )
    pool.stop()
    await asyncio.wait_for(task, DEADLINE_SECONDS)
    release.set()

    left = current(store, job.id)
    assert (left.status, left.attempts) == (Status.PROCESSING, 1)
    assert "abandoned" in finished_outcomes(caplog)


class BrokenTracer:
    """Fails where the pool cannot recover the attempt: a bug inside the worker."""

    def start(self, job: Any, claim_started_ns: int, claim_ended_ns: int) -> Any:
        raise RuntimeError("tracer broke")


async def test_an_attempt_that_fails_inside_the_worker_stops_renewing_its_lease() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()

    @registry.handler("any")
    async def anything(ctx: JobContext, payload: Any) -> None:
        pass

    job = await submit(store, "any")
    pool = WorkerPool(
        store, registry, DataclassDecoder(), config(lease_duration=LEASE), tracer=BrokenTracer()
    )
    async with running(pool):
        await eventually(lambda: current(store, job.id).status is Status.PROCESSING, "claimed")
        await eventually(lambda: pool.in_flight == 0, "the broken attempt ends")
        # No longer held: the lease is left to run out, for recovery to take the job.
        assert pool.held() == {}
