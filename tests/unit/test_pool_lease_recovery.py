"""The lease recovery loop, against the in-memory store and its manual clock."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest

from jobqueue.domain.status import Status
from jobqueue.entrypoints.worker.lease_recovery import LeaseRecovery
from tests.fakes import TEST_TYPES, InMemoryJobStore, ManualClock, RecordingObserver
from tests.unit.pool_harness import DEADLINE_SECONDS, eventually, submit

LEASE = timedelta(seconds=30)
TICK = timedelta(milliseconds=5)


async def expired_jobs(store: InMemoryJobStore, clock: ManualClock, count: int) -> None:
    for _ in range(count):
        await submit(store, "work", max_attempts=2)
    await store.claim(count, LEASE, types=TEST_TYPES)
    clock.advance(LEASE * 2)


async def test_run_once_recovers_batch_after_batch_until_none_is_left(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="jobqueue.worker")
    clock = ManualClock()
    store = InMemoryJobStore(clock)
    observer = RecordingObserver()
    await expired_jobs(store, clock, 5)
    recovery = LeaseRecovery(store, TICK, batch_size=2, observer=observer)

    assert await recovery.run_once() == 5

    assert [len(batch) for batch in observer.recoveries] == [2, 2, 1]
    assert {j.status for j in store.jobs()} == {Status.PENDING}
    logged = {getattr(r, "job_id", None) for r in caplog.records if "recovered" in r.msg}
    assert logged == {str(j.id) for j in store.jobs()}


async def test_run_once_leaves_live_leases_alone() -> None:
    clock = ManualClock()
    store = InMemoryJobStore(clock)
    await submit(store, "work")
    await store.claim(1, LEASE, types=TEST_TYPES)

    assert await LeaseRecovery(store, TICK).run_once() == 0
    assert store.jobs()[0].status is Status.PROCESSING


async def test_run_recovers_on_start_and_returns_after_stop() -> None:
    clock = ManualClock()
    store = InMemoryJobStore(clock)
    observer = RecordingObserver()
    await expired_jobs(store, clock, 1)
    # An hour between passes: only the pass made on start can recover the job in time.
    recovery = LeaseRecovery(store, timedelta(hours=1), observer=observer)

    task = asyncio.create_task(recovery.run())
    await eventually(lambda: len(observer.recoveries) == 1, "the first pass recovered")
    recovery.stop()
    await asyncio.wait_for(task, DEADLINE_SECONDS)

    assert store.jobs()[0].status is Status.PENDING


async def test_run_keeps_going_after_store_errors(caplog: pytest.LogCaptureFixture) -> None:
    # An outage is a WARNING naming it (`log_failure`), not an ERROR with a traceback.
    caplog.set_level(logging.WARNING, logger="jobqueue.worker")
    clock = ManualClock()
    store = InMemoryJobStore(clock)
    observer = RecordingObserver()
    await expired_jobs(store, clock, 1)
    store.available = False
    recovery = LeaseRecovery(store, TICK, observer=observer)

    task = asyncio.create_task(recovery.run())
    await eventually(
        lambda: any(r.msg.startswith("lease recovery failed") for r in caplog.records),
        "a failed pass was logged",
    )
    store.available = True
    await eventually(lambda: len(observer.recoveries) == 1, "a later pass recovered")
    recovery.stop()
    await asyncio.wait_for(task, DEADLINE_SECONDS)

    assert not task.cancelled()


@pytest.mark.parametrize(
    ("interval", "batch_size"), [(timedelta(0), 10), (timedelta(seconds=-1), 10), (TICK, 0)]
)
def test_nonsense_settings_are_refused(interval: timedelta, batch_size: int) -> None:
    with pytest.raises(ValueError, match="must be"):
        LeaseRecovery(InMemoryJobStore(), interval, batch_size=batch_size)
