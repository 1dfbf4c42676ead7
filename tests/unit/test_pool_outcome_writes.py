"""Endings are written in batches, each job still fenced by its own lease, and a write
that fails is tried again until it is recorded or its lease runs out."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from jobqueue.domain.job import Job
from jobqueue.domain.outcome import Decision
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.status import Status
from jobqueue.entrypoints.worker.outcomes import OutcomeWriter, Written
from tests.fakes import TEST_TYPES, InMemoryJobStore, ManualClock, RecordingObserver
from tests.support.batched_writes import BatchRecordingStore, gated_registry
from tests.unit.pool_harness import (
    DEADLINE_SECONDS,
    FAST,
    config,
    eventually,
    make_pool,
    running,
    settled,
    submit,
)


def outcomes(caplog: pytest.LogCaptureFixture) -> dict[str, str]:
    return {
        str(getattr(r, "job_id", None)): str(getattr(r, "outcome", None))
        for r in caplog.records
        if r.getMessage() == "job finished"
    }


def current(store: InMemoryJobStore, job: Job) -> Job:
    return next(j for j in store.jobs() if j.id == job.id)


async def test_attempts_finishing_together_are_completed_in_one_write() -> None:
    store = BatchRecordingStore()
    gate = asyncio.Event()
    entered: list[UUID] = []
    jobs = [await submit(store, "gated") for _ in range(4)]
    pool = make_pool(store, gated_registry(gate, entered), config(workers=4))

    async with running(pool):
        await eventually(lambda: len(entered) == 4, "all four attempts run")
        gate.set()
        for job in jobs:
            await settled(store, job)

    assert [len(batch) for batch in store.batches] == [4]
    assert {lease.job_id for lease in store.batches[0]} == {job.id for job in jobs}


async def test_stale_lease_in_a_batch_is_refused_while_the_others_complete(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="jobqueue.worker")
    clock = ManualClock()
    store = BatchRecordingStore(clock)
    observer = RecordingObserver()
    gate = asyncio.Event()
    entered: list[UUID] = []
    stale = await submit(store, "gated")
    fresh = await submit(store, "gated")
    pool = make_pool(store, gated_registry(gate, entered), observer=observer)

    async with running(pool):
        await eventually(lambda: len(entered) == 2, "both attempts run")
        claimed = {job.id: job for job in store.jobs()}
        # Another claim supersedes one attempt only: released behind its back, then
        # claimed again (by a worker elsewhere) with a newer token.
        # Behind the pool's back: not one of the batches the pool writes.
        await InMemoryJobStore.record_many(store, [(claimed[stale.id].lease, Decision.release())])
        [newer] = await store.claim(1, FAST.lease_duration, types=TEST_TYPES)
        assert newer.id == stale.id
        gate.set()
        await settled(store, fresh)
        await eventually(lambda: len(observer.lost) == 1, "the stale outcome is refused")

    assert [sorted(str(lease.job_id) for lease in batch) for batch in store.batches] == [
        sorted([str(stale.id), str(fresh.id)])
    ]
    assert [job.id for job in observer.lost] == [stale.id]
    assert current(store, stale) == newer
    assert (current(store, fresh).status, current(store, fresh).locked_until) == (
        Status.COMPLETED,
        None,
    )
    assert outcomes(caplog) == {str(stale.id): "lease_lost", str(fresh.id): "completed"}


async def test_failed_batch_write_is_tried_again_and_recorded_and_the_pool_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="jobqueue.worker")
    store = BatchRecordingStore()
    store.failures_left = 1
    observer = RecordingObserver()
    gate = asyncio.Event()
    entered: list[UUID] = []
    blipped = [await submit(store, "gated") for _ in range(2)]
    pool = make_pool(store, gated_registry(gate, entered), observer=observer)

    async with running(pool) as pool_task:
        await eventually(lambda: len(entered) == 2, "both attempts run")
        gate.set()
        await eventually(lambda: len(outcomes(caplog)) == 2, "both attempts are logged")
        later = await submit(store, "quick")
        pool.wake()
        done = await settled(store, later)
        assert not pool_task.done()

    assert done.status is Status.COMPLETED
    # The failed batch went out again whole, then the later job on its own.
    assert [len(batch) for batch in store.batches] == [2, 2, 1]
    assert {current(store, job).status for job in blipped} == {Status.COMPLETED}
    assert [outcomes(caplog)[str(job.id)] for job in blipped] == ["completed", "completed"]
    assert sorted(tries for _, tries in observer.retried_writes) == [2, 2]
    finished = [r for r in caplog.records if r.getMessage() == "job finished"]
    blipped_lines = [r for r in finished if str(getattr(r, "job_id", None)) != str(later.id)]
    assert {getattr(r, "tries", None) for r in blipped_lines} == {2}


async def test_a_write_failing_until_the_lease_runs_out_leaves_the_job_to_recovery(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="jobqueue.worker")
    store = BatchRecordingStore()
    store.failures_left = 1_000_000
    observer = RecordingObserver()
    job = await submit(store, "quick")
    pool = make_pool(
        store,
        gated_registry(asyncio.Event(), []),
        config(lease_duration=timedelta(milliseconds=300)),
        observer=observer,
    )

    async with running(pool):
        await eventually(lambda: str(job.id) in outcomes(caplog), "the attempt gives up its write")

    assert outcomes(caplog) == {str(job.id): "unrecorded"}
    assert len(store.batches) > 1
    assert [each.id for each in observer.unrecorded] == [job.id]
    # Left processing, for lease recovery to pick up.
    assert current(store, job).status is Status.PROCESSING
    failures = [r for r in caplog.records if r.getMessage().startswith("recording outcome")]
    assert len(failures) == 1
    # An outage: named, without a traceback.
    assert failures[0].levelno == logging.WARNING
    assert failures[0].exc_info is None
    assert getattr(failures[0], "error", "").startswith("StoreUnavailable: ")
    assert failures[0].module == "ending_report"  # the line is the caller's, not the helper's


async def test_completions_waiting_behind_a_write_are_flushed_at_shutdown() -> None:
    store = BatchRecordingStore()
    store.hold = True
    second_gate = asyncio.Event()
    entered: list[UUID] = []
    registry = Registry()

    @registry.handler("first")
    async def first(ctx: JobContext, payload: Any) -> None:
        entered.append(ctx.job_id)

    @registry.handler("second")
    async def second(ctx: JobContext, payload: Any) -> None:
        entered.append(ctx.job_id)
        await second_gate.wait()

    jobs = [await submit(store, "first"), await submit(store, "second")]
    pool = make_pool(store, registry)
    task = asyncio.create_task(pool.run())
    # The first completion's write is in flight and held there...
    await asyncio.wait_for(store.entered.wait(), DEADLINE_SECONDS)
    # ...while the second attempt finishes and its completion queues behind it.
    second_gate.set()
    for _ in range(5):
        await asyncio.sleep(0)
    assert len(entered) == 2
    pool.stop()
    for _ in range(5):
        await asyncio.sleep(0)
    assert not task.done()
    store.gate.set()
    await asyncio.wait_for(task, DEADLINE_SECONDS)

    assert [len(batch) for batch in store.batches] == [1, 1]
    assert {current(store, job).status for job in jobs} == {Status.COMPLETED}


async def test_a_write_that_never_answers_is_tried_again_until_its_lease_runs_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="jobqueue.worker")
    store = BatchRecordingStore()
    store.hold = True  # and the gate never opens: the store stopped answering
    job = await submit(store, "quick")
    pool = make_pool(
        store,
        gated_registry(asyncio.Event(), []),
        config(outcome_timeout=timedelta(milliseconds=50), lease_duration=timedelta(seconds=1)),
    )

    task = asyncio.create_task(pool.run())
    await asyncio.wait_for(store.entered.wait(), DEADLINE_SECONDS)
    await eventually(lambda: str(job.id) in outcomes(caplog), "the attempt gives up on its write")
    pool.stop()
    # Shutdown waits for the writes, which their deadlines end.
    await asyncio.wait_for(task, DEADLINE_SECONDS)

    assert outcomes(caplog) == {str(job.id): "unrecorded"}
    # Each try was bounded by the outcome timeout, so several went out within the lease.
    assert len(store.batches) > 2
    assert current(store, job).status is Status.PROCESSING


async def test_stale_and_current_lease_of_one_job_in_one_batch_are_told_apart() -> None:
    # The attempt that lost its lease and the one that took the job over may finish in
    # the same loop turn; the stale one must hear it lost, not that the job completed.
    clock = ManualClock()
    store = InMemoryJobStore(clock)
    job = await submit(store, "any")
    (first,) = await store.claim(1, timedelta(seconds=1), types=TEST_TYPES)
    clock.advance(timedelta(seconds=2))
    await store.recover_expired(10)
    (second,) = await store.claim(1, timedelta(seconds=1), types=TEST_TYPES)
    writer = OutcomeWriter(store, timedelta(seconds=5))
    forever = lambda: float("inf")  # noqa: E731

    stale = writer.write(first.lease, Decision.complete(), forever)
    current = writer.write(second.lease, Decision.complete(), forever)

    assert ((await stale).written, (await current).written) == (
        Written.LEASE_LOST,
        Written.RECORDED,
    )
    assert (await store.get(job.id)).status is Status.COMPLETED
