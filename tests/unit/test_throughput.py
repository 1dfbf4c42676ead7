"""The rollup's in-memory half: latencies into their buckets, outcomes into their
counters, quantiles read back from buckets, pools counting through the observer seam,
and a flush that fails keeping its counts for the next."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import pytest

from jobqueue.domain.attempts import Outcome
from jobqueue.domain.errors import Permanent, StoreUnavailable
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.status import Status
from jobqueue.domain.throughput import (
    BUCKETS,
    PICKUP_BOUNDS_MS,
    RollupCounts,
    Slot,
    Tallies,
    Window,
    bucket_of,
    quantile,
)
from jobqueue.entrypoints.worker.observer import observing
from jobqueue.entrypoints.worker.throughput import Counting, RollupFlusher
from tests.fakes import InMemoryJobStore, ManualClock, RecordingObserver
from tests.unit.pool_harness import config, eventually, make_pool, running


@pytest.mark.parametrize(
    ("seconds", "bucket"),
    [
        (0.0, 0),
        (0.01, 0),
        (0.0101, 1),
        (0.25, 2),
        (59.0, 6),
        (3600.0, len(PICKUP_BOUNDS_MS) - 1),
        (3600.5, len(PICKUP_BOUNDS_MS)),
    ],
)
def test_a_latency_falls_in_the_bucket_whose_bound_it_reaches(seconds: float, bucket: int) -> None:
    assert bucket_of(seconds) == bucket


def test_outcomes_count_as_the_operator_sees_them() -> None:
    tallies = Tallies()
    for outcome in Outcome:
        tallies.ended("mail", outcome)
    tallies.picked_up("mail", timedelta(milliseconds=40))
    tallies.picked_up("mail", timedelta(seconds=2))

    (mail,) = tallies.take().values()

    # Dead letters are failures; releases, snoozes and the unrecorded count nowhere.
    assert (mail.completed, mail.failed, mail.retried) == (1, 2, 1)
    assert mail.picked == 2
    assert mail.pickup_seconds == pytest.approx(2.04)
    assert mail.pickup_buckets[1] == 1
    assert mail.pickup_buckets[4] == 1
    assert sum(mail.pickup_buckets) == 2
    assert tallies.take() == {}, "taking starts the counts again"


def test_counts_given_back_join_those_counted_since() -> None:
    tallies = Tallies()
    tallies.ended("mail", Outcome.COMPLETED)
    taken = tallies.take()
    tallies.ended("mail", Outcome.COMPLETED)
    tallies.ended("reports", Outcome.FAILED)

    tallies.give_back(taken)

    again = tallies.take()
    assert again["mail"].completed == 2
    assert again["reports"].failed == 1


def test_quantiles_come_from_the_buckets() -> None:
    assert quantile([0] * BUCKETS, 0.5) is None
    # Every latency in the 50–250 ms bucket: both quantiles inside it, in order.
    inside = [0, 0, 10, *[0] * (BUCKETS - 3)]
    p50, p95 = quantile(inside, 0.5), quantile(inside, 0.95)
    assert p50 is not None
    assert p95 is not None
    assert 0.05 < p50 < p95 <= 0.25
    # Half fast, half slow: the median at the fast bucket's top, the p95 among the slow.
    split = [0] * BUCKETS
    split[bucket_of(0.001)] = split[bucket_of(2)] = 5
    assert quantile(split, 0.5) == pytest.approx(0.01)
    slow = quantile(split, 0.95)
    assert slow is not None
    assert 1 < slow <= 5
    # Past the last bound all that is known is the bound.
    assert quantile([*[0] * (BUCKETS - 1), 3], 0.95) == PICKUP_BOUNDS_MS[-1] / 1000


def test_a_slot_reads_its_quantiles_and_a_window_its_span() -> None:
    slot = Slot(at=None, picked=1, pickup_buckets=(1, *[0] * (BUCKETS - 1)))  # type: ignore[arg-type]
    assert slot.pickup_quantile(1.0) == pytest.approx(0.01)
    assert Window("x", timedelta(minutes=15), 96).span == timedelta(days=1)


async def test_pools_count_each_queue_through_the_observer_seam() -> None:
    clock = ManualClock()
    store = InMemoryJobStore(clock)
    registry = Registry()

    @registry.handler("greet")
    async def greet(ctx: JobContext, payload: Any) -> None:
        pass

    @registry.handler("doomed")
    async def doomed(ctx: JobContext, payload: Any) -> None:
        raise Permanent("never")

    @registry.handler("flaky")
    async def flaky(ctx: JobContext, payload: Any) -> None:
        if ctx.attempt == 1:
            raise RuntimeError("try again")

    await store.submit(NewJob(type="greet", queue="default", max_attempts=1))
    await store.submit(NewJob(type="doomed", queue="default", max_attempts=1))
    await store.submit(NewJob(type="flaky", queue="mail", max_attempts=3))
    # Claimed 90 s after they were due, by the store's clock.
    clock.advance(timedelta(seconds=90))
    tallies = Tallies()
    recorded = RecordingObserver()
    observer = observing(recorded, Counting(tallies))
    counted: dict[str, RollupCounts] = {}

    def every_attempt_counted() -> bool:
        for queue, tally in tallies.take().items():
            counted.setdefault(queue, RollupCounts()).add(tally)
        return len(recorded.finished) == 4

    default = make_pool(store, registry, observer=observer)
    mail = make_pool(store, registry, config(queue="mail"), observer=observer)
    async with running(default), running(mail):
        await eventually(lambda: len(recorded.finished) == 3, "the first attempts ended")
        # The retry is due after its backoff (milliseconds) by the store's clock.
        clock.advance(timedelta(seconds=30))
        await eventually(every_attempt_counted, "four attempts ended")

    assert (counted["default"].completed, counted["default"].failed) == (1, 1)
    assert (counted["mail"].completed, counted["mail"].retried) == (1, 1)
    assert counted["default"].picked == 2
    # 90 s waited: the 30 s–2 min bucket, for both jobs of `default`.
    assert counted["default"].pickup_buckets[bucket_of(90)] == 2
    assert counted["default"].pickup_seconds == pytest.approx(180)


def test_one_observer_failing_spares_the_others() -> None:
    class Broken(RecordingObserver):
        def attempt_started(self, job: Job) -> None:
            raise RuntimeError("metrics broke")

    recorded = RecordingObserver()
    observer = observing(Broken(), recorded)
    assert observer is not None
    job = _job()

    observer.attempt_started(job)

    assert recorded.started == [job]
    assert observing(None, recorded) is recorded
    assert observing(None, None) is None


def test_lease_recovery_counts_a_dead_letter_as_failed() -> None:
    tallies = Tallies()
    dead = _job(status="dead_letter")
    back = _job(status="pending")

    Counting(tallies).recovered([dead, back])

    assert tallies.take()["default"].failed == 1


class FlakyRollup:
    """Refuses its first `failures` adds, then keeps what it is given."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.added: list[Mapping[str, RollupCounts]] = []

    async def add(self, tallies: Mapping[str, RollupCounts]) -> None:
        if self.failures:
            self.failures -= 1
            raise StoreUnavailable("database away")
        self.added.append(tallies)

    async def series(self, window: Window, queue: str | None = None) -> Sequence[Slot]:
        return []

    async def prune(self, older_than: timedelta, limit: int) -> int:
        return 0


async def test_a_failed_flush_keeps_its_counts_for_the_next() -> None:
    tallies = Tallies()
    rollup = FlakyRollup(failures=1)
    flusher = RollupFlusher(tallies, rollup)
    tallies.ended("mail", Outcome.COMPLETED)

    with pytest.raises(StoreUnavailable):
        await flusher.flush()
    tallies.ended("mail", Outcome.COMPLETED)
    await flusher.flush()
    await flusher.flush()

    assert [dict(added) for added in rollup.added] == [{"mail": RollupCounts(completed=2)}]


async def test_a_stopped_flusher_writes_what_was_counted_last() -> None:
    tallies = Tallies()
    rollup = FlakyRollup(failures=0)
    flusher = RollupFlusher(tallies, rollup, interval=timedelta(hours=1))
    flusher.stop()
    tallies.ended("mail", Outcome.FAILED)

    await flusher.run()

    assert [dict(added) for added in rollup.added] == [{"mail": RollupCounts(failed=1)}]


def _job(status: str = "pending") -> Job:
    stored = NewJob(type="greet", max_attempts=1).stored(uuid4(), datetime.now(UTC))
    return replace(stored, status=Status(status))
