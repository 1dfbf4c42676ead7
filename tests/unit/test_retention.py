"""The retention loop and its policy, against the in-memory store and its manual clock."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest

from jobqueue.domain.errors import StoreUnavailable
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.outcome import Decision
from jobqueue.domain.retention import RetentionPolicy
from jobqueue.domain.status import Status
from jobqueue.entrypoints.worker.retention import RetentionLoop
from tests.fakes import TEST_TYPES, InMemoryJobStore, ManualClock
from tests.support.endings import record
from tests.unit.pool_harness import DEADLINE_SECONDS, eventually, submit

LEASE = timedelta(minutes=5)
TICK = timedelta(milliseconds=5)
DAY = timedelta(days=1)
POLICY = RetentionPolicy(completed=DAY, failed=2 * DAY)


async def jobs_in(store: InMemoryJobStore, status: Status, count: int = 1) -> list[Job]:
    """`count` jobs brought to `status` through the port, finishing at the clock's now."""
    made = []
    for _ in range(count):
        job = await submit(store, "work")
        [claimed] = await store.claim(1, LEASE, types=TEST_TYPES)
        assert claimed.id == job.id
        if status is Status.COMPLETED:
            made.append(await record(store, claimed.lease, Decision.complete()))
        elif status is Status.FAILED:
            made.append(await record(store, claimed.lease, Decision.fail("bad input")))
        elif status is Status.DEAD_LETTER:
            made.append(await record(store, claimed.lease, Decision.dead_letter("gave up")))
        elif status is Status.PENDING:
            # Not due for years, so that the next claim here takes the next new job.
            made.append(await record(store, claimed.lease, Decision.backoff(DAY * 3650, "later")))
        else:
            made.append(claimed)
    return made


class Reports:
    """An `on_pruned` callback that keeps every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[Status, int]] = []

    def __call__(self, status: Status, count: int) -> None:
        self.calls.append((status, count))


def remaining(store: InMemoryJobStore) -> set[Status]:
    return {job.status for job in store.jobs()}


async def test_run_once_prunes_batch_after_batch_until_a_batch_comes_back_short() -> None:
    clock = ManualClock()
    store = InMemoryJobStore(clock)
    await jobs_in(store, Status.COMPLETED, 5)
    clock.advance(DAY * 2)
    reports = Reports()
    retention = RetentionLoop(store, POLICY, TICK, batch_size=2, on_pruned=reports)

    assert await retention.run_once() == {
        Status.COMPLETED: 5,
        Status.FAILED: 0,
        Status.CANCELLED: 0,
    }

    assert reports.calls == [(Status.COMPLETED, 2), (Status.COMPLETED, 2), (Status.COMPLETED, 1)]
    assert store.jobs() == []


async def test_a_backlog_that_fills_the_last_batch_exactly_ends_on_an_empty_batch() -> None:
    clock = ManualClock()
    store = InMemoryJobStore(clock)
    await jobs_in(store, Status.FAILED, 4)
    clock.advance(DAY * 3)
    reports = Reports()

    pruned = await RetentionLoop(store, POLICY, TICK, batch_size=2, on_pruned=reports).run_once()

    assert pruned[Status.FAILED] == 4
    assert reports.calls == [(Status.FAILED, 2), (Status.FAILED, 2)]


async def test_each_status_is_kept_for_its_own_time() -> None:
    clock = ManualClock()
    store = InMemoryJobStore(clock)
    await jobs_in(store, Status.COMPLETED)
    [failed] = await jobs_in(store, Status.FAILED)
    # Past the completed jobs' day, within the failed jobs' two.
    clock.advance(DAY + timedelta(seconds=1))

    assert await RetentionLoop(store, POLICY, TICK).run_once() == {
        Status.COMPLETED: 1,
        Status.FAILED: 0,
        Status.CANCELLED: 0,
    }
    assert [job.id for job in store.jobs()] == [failed.id]

    clock.advance(DAY)
    assert await RetentionLoop(store, POLICY, TICK).run_once() == {
        Status.COMPLETED: 0,
        Status.FAILED: 1,
        Status.CANCELLED: 0,
    }
    assert store.jobs() == []


async def test_dead_letters_and_live_jobs_are_never_pruned() -> None:
    clock = ManualClock()
    store = InMemoryJobStore(clock)
    for status in (Status.DEAD_LETTER, Status.PENDING, Status.PROCESSING):
        await jobs_in(store, status)
    [old] = await jobs_in(store, Status.COMPLETED)
    clock.advance(DAY * 365)
    [recent] = await jobs_in(store, Status.COMPLETED)

    pruned = await RetentionLoop(store, POLICY, TICK).run_once()

    assert pruned == {Status.COMPLETED: 1, Status.FAILED: 0, Status.CANCELLED: 0}
    kept = {job.id: job.status for job in store.jobs()}
    assert old.id not in kept
    assert kept[recent.id] is Status.COMPLETED
    assert set(kept.values()) == {
        Status.DEAD_LETTER,
        Status.PENDING,
        Status.PROCESSING,
        Status.COMPLETED,
    }


async def test_a_status_without_retention_is_kept_forever() -> None:
    clock = ManualClock()
    store = InMemoryJobStore(clock)
    await jobs_in(store, Status.COMPLETED)
    await jobs_in(store, Status.FAILED)
    clock.advance(DAY * 365)

    pruned = await RetentionLoop(store, RetentionPolicy(completed=None), TICK).run_once()

    assert pruned == {Status.FAILED: 1, Status.CANCELLED: 0}
    assert remaining(store) == {Status.COMPLETED}


async def test_run_once_logs_how_many_of_each_status_it_pruned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="jobqueue.worker")
    clock = ManualClock()
    store = InMemoryJobStore(clock)
    await jobs_in(store, Status.COMPLETED, 2)
    await jobs_in(store, Status.FAILED, 1)
    clock.advance(DAY * 3)

    await RetentionLoop(store, POLICY, TICK).run_once()

    [record] = [r for r in caplog.records if r.msg == "jobs pruned"]
    assert getattr(record, "count", None) == 3
    assert getattr(record, "by_status", None) == {"completed": 2, "failed": 1, "cancelled": 0}


async def test_nothing_to_prune_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="jobqueue.worker")

    assert await RetentionLoop(InMemoryJobStore(), POLICY, TICK).run_once() == {
        Status.COMPLETED: 0,
        Status.FAILED: 0,
        Status.CANCELLED: 0,
    }
    assert not [r for r in caplog.records if r.msg == "jobs pruned"]


async def test_a_failed_batch_still_logs_what_the_batches_before_it_pruned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="jobqueue.worker")
    clock = ManualClock()
    store = InMemoryJobStore(clock)
    await jobs_in(store, Status.COMPLETED, 5)
    clock.advance(DAY * 2)

    def database_goes_away(status: Status, count: int) -> None:
        store.available = False

    retention = RetentionLoop(store, POLICY, TICK, batch_size=2, on_pruned=database_goes_away)
    with pytest.raises(StoreUnavailable):
        await retention.run_once()

    [record] = [r for r in caplog.records if r.msg == "jobs pruned"]
    assert getattr(record, "count", None) == 2


async def test_stop_ends_a_pass_after_the_batch_in_progress() -> None:
    clock = ManualClock()
    store = InMemoryJobStore(clock)
    await jobs_in(store, Status.COMPLETED, 5)
    clock.advance(DAY * 2)
    reports = Reports()

    def stop_after_first_batch(status: Status, count: int) -> None:
        reports(status, count)
        retention.stop()

    retention = RetentionLoop(store, POLICY, TICK, batch_size=2, on_pruned=stop_after_first_batch)

    assert await retention.run_once() == {
        Status.COMPLETED: 2,
        Status.FAILED: 0,
        Status.CANCELLED: 0,
    }
    assert reports.calls == [(Status.COMPLETED, 2)]
    assert len(store.jobs()) == 3


async def test_a_failing_report_does_not_stop_the_pruning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="jobqueue.worker")
    clock = ManualClock()
    store = InMemoryJobStore(clock)
    await jobs_in(store, Status.COMPLETED, 3)
    clock.advance(DAY * 2)

    def broken(status: Status, count: int) -> None:
        raise RuntimeError("metrics are down")

    retention = RetentionLoop(store, POLICY, TICK, batch_size=2, on_pruned=broken)

    assert (await retention.run_once())[Status.COMPLETED] == 3
    assert store.jobs() == []
    assert any(r.msg == "reporting pruned jobs failed" for r in caplog.records)


async def test_run_prunes_on_start_and_returns_after_stop() -> None:
    clock = ManualClock()
    store = InMemoryJobStore(clock)
    await jobs_in(store, Status.COMPLETED)
    clock.advance(DAY * 2)
    # An hour between passes: only the pass made on start can prune the job in time.
    retention = RetentionLoop(store, POLICY, timedelta(hours=1))

    task = asyncio.create_task(retention.run())
    await eventually(lambda: store.jobs() == [], "the first pass pruned")
    retention.stop()
    await asyncio.wait_for(task, DEADLINE_SECONDS)


async def test_run_keeps_going_after_store_errors(caplog: pytest.LogCaptureFixture) -> None:
    # An outage is a WARNING naming it (`log_failure`), not an ERROR with a traceback.
    caplog.set_level(logging.WARNING, logger="jobqueue.worker")
    clock = ManualClock()
    store = InMemoryJobStore(clock)
    await jobs_in(store, Status.COMPLETED)
    clock.advance(DAY * 2)
    store.available = False
    retention = RetentionLoop(store, POLICY, TICK)

    task = asyncio.create_task(retention.run())
    await eventually(
        lambda: any(r.msg.startswith("retention failed") for r in caplog.records),
        "a failed pass was logged",
    )
    store.available = True
    await eventually(lambda: store.jobs() == [], "a later pass pruned")
    retention.stop()
    await asyncio.wait_for(task, DEADLINE_SECONDS)

    assert not task.cancelled()


@pytest.mark.parametrize(
    ("interval", "batch_size"), [(timedelta(0), 10), (timedelta(seconds=-1), 10), (TICK, 0)]
)
def test_nonsense_loop_settings_are_refused(interval: timedelta, batch_size: int) -> None:
    with pytest.raises(ValueError, match="must be"):
        RetentionLoop(InMemoryJobStore(), POLICY, interval, batch_size=batch_size)


async def test_cancelled_jobs_are_kept_as_long_as_failed_ones() -> None:
    clock = ManualClock()
    store = InMemoryJobStore(clock)
    job = (await store.submit(NewJob(type="email", max_attempts=3))).job
    await store.cancel(job.id)
    clock.advance(DAY + timedelta(seconds=1))
    # Past the completed jobs' day, within the failed (and cancelled) jobs' two.
    assert (await RetentionLoop(store, POLICY, TICK).run_once())[Status.CANCELLED] == 0
    clock.advance(DAY)
    assert (await RetentionLoop(store, POLICY, TICK).run_once())[Status.CANCELLED] == 1
    assert store.jobs() == []


def test_the_default_policy_keeps_completed_jobs_a_week_and_failed_ones_thirty_days() -> None:
    assert RetentionPolicy().ages == {
        Status.COMPLETED: timedelta(days=7),
        Status.FAILED: timedelta(days=30),
        Status.CANCELLED: timedelta(days=30),
    }


def test_a_policy_keeping_everything_prunes_no_status() -> None:
    assert RetentionPolicy(completed=None, failed=None).ages == {}


@pytest.mark.parametrize("age", [timedelta(0), timedelta(seconds=-1)])
@pytest.mark.parametrize("status", ["completed", "failed"])
def test_a_policy_refuses_an_age_that_is_not_positive(status: str, age: timedelta) -> None:
    with pytest.raises(ValueError, match=f"{status} jobs must be kept for a positive time"):
        RetentionPolicy(**{status: age})
