"""The Prometheus observer: what each reported event does to the counters."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TypedDict

import pytest
from prometheus_client import CollectorRegistry

from jobqueue.adapters.telemetry.metrics import Metrics, QueueDepthRefresher
from jobqueue.domain.errors import StoreUnavailable
from jobqueue.domain.job import Job
from jobqueue.domain.outcome import DECIDED, Decision
from jobqueue.domain.status import Status

# One decision of every ending; the first test below fails when an outcome is added
# without one here.
ENDINGS = [
    Decision.complete(),
    Decision.backoff(timedelta(seconds=1), "boom"),
    Decision.fail("bad"),
    Decision.dead_letter("again"),
    Decision.release(),
    Decision.snooze(timedelta(seconds=1)),
]


def test_the_endings_listed_here_cover_every_outcome_an_ending_may_be_decided_as() -> None:
    assert {decision.outcome for decision in ENDINGS} == DECIDED


# The labels of the jobs `job()` builds by default.
SLEEP = {"queue": "default", "type": "sleep"}


class Pair(TypedDict):
    """A queue and a type: `job()`'s keywords, and the labels of its series."""

    queue: str
    type: str


def job(status: Status = Status.PROCESSING, *, queue: str = "default", type: str = "sleep") -> Job:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    return Job(
        id=uuid.uuid4(),
        type=type,
        queue=queue,
        payload={},
        status=status,
        attempts=1,
        max_attempts=3,
        run_at=now,
        locked_until=None,
        lease_token=1,
        last_error=None,
        idempotency_key=None,
        created_at=now,
        updated_at=now,
    )


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_each_decision_moves_its_own_counter_and_histogram_series() -> None:
    metrics = Metrics()

    metrics.attempt_finished(job(), Decision.complete(), 0.2)
    metrics.attempt_finished(job(), Decision.backoff(timedelta(seconds=1), "boom"), 0.3)
    metrics.attempt_finished(job(), Decision.fail("bad"), 0.4)
    metrics.attempt_finished(job(), Decision.dead_letter("again"), 0.5)
    metrics.attempt_finished(job(), Decision.release(), 0.6)
    metrics.attempt_finished(job(), Decision.snooze(timedelta(seconds=5)), 0.7)

    assert sample(metrics, "jobs_completed_total", **SLEEP) == 1
    assert sample(metrics, "jobs_retried_total", **SLEEP) == 1
    assert sample(metrics, "jobs_failed_total", **SLEEP, status="failed") == 1
    assert sample(metrics, "jobs_failed_total", **SLEEP, status="dead_letter") == 1
    assert sample(metrics, "jobs_snoozed_total", **SLEEP) == 1
    for outcome, seconds in [
        ("completed", 0.2),
        ("retried", 0.3),
        ("failed", 0.4),
        ("dead_letter", 0.5),
        ("released", 0.6),
        ("snoozed", 0.7),
    ]:
        assert (
            sample(metrics, "job_processing_duration_seconds_count", **SLEEP, outcome=outcome) == 1
        )
        assert sample(
            metrics, "job_processing_duration_seconds_sum", **SLEEP, outcome=outcome
        ) == pytest.approx(seconds)


def test_recovered_jobs_are_counted_and_those_dead_lettered_count_as_dead_letters() -> None:
    metrics = Metrics()

    metrics.recovered([job(Status.PENDING), job(Status.DEAD_LETTER), job(Status.PENDING)])

    assert sample(metrics, "jobs_recovered_total", **SLEEP) == 3
    assert sample(metrics, "jobs_failed_total", **SLEEP, status="dead_letter") == 1
    assert sample(metrics, "jobs_completed_total", **SLEEP) == 0


def test_submissions_and_lost_leases_are_counted() -> None:
    metrics = Metrics()

    metrics.job_submitted()
    metrics.job_submitted()
    metrics.lease_lost(job())

    assert sample(metrics, "jobs_submitted_total") == 2
    assert sample(metrics, "jobs_lease_lost_total", **SLEEP) == 1


def test_two_instances_in_one_process_do_not_collide() -> None:
    first, second = Metrics(), Metrics(CollectorRegistry())

    first.job_submitted()

    assert sample(first, "jobs_submitted_total") == 1
    assert sample(second, "jobs_submitted_total") == 0


def test_the_exposition_includes_the_process_collector() -> None:
    assert b"process_cpu_seconds_total" in Metrics().render()


class Counts:
    """A `QueueDepthSource` giving canned answers, one per call."""

    def __init__(self, *answers: Mapping[Status, int] | Exception) -> None:
        self._answers = list(answers)
        self.when_exhausted: Callable[[], None] = lambda: None

    async def count_by_status(self) -> Mapping[Status, int]:
        answer = self._answers.pop(0)
        if not self._answers:
            self.when_exhausted()
        if isinstance(answer, Exception):
            raise answer
        return answer


async def test_queue_depth_refresh_sets_every_unfinished_status_and_zeros_the_absent() -> None:
    metrics = Metrics()
    refresher = QueueDepthRefresher(Counts({Status.PENDING: 4, Status.DEAD_LETTER: 1}), metrics)

    await refresher.refresh()

    assert sample(metrics, "jobs_queue_depth", status="pending") == 4
    assert sample(metrics, "jobs_queue_depth", status="dead_letter") == 1
    assert metrics.registry.get_sample_value("jobs_queue_depth", {"status": "processing"}) == 0


async def test_queue_depth_has_no_series_for_finished_jobs() -> None:
    # Finished jobs are history, not depth; the store does not count them (too costly).
    metrics = Metrics()
    refresher = QueueDepthRefresher(Counts({Status.COMPLETED: 7, Status.FAILED: 1}), metrics)

    await refresher.refresh()

    for status in ("completed", "failed"):
        assert metrics.registry.get_sample_value("jobs_queue_depth", {"status": status}) is None


async def test_a_failed_refresh_keeps_the_last_values() -> None:
    metrics = Metrics()
    refresher = QueueDepthRefresher(Counts({Status.PENDING: 2}, StoreUnavailable("down")), metrics)

    await refresher.refresh()
    with pytest.raises(StoreUnavailable):
        await refresher.refresh()

    assert sample(metrics, "jobs_queue_depth", status="pending") == 2


async def test_the_refresh_loop_survives_a_failure_and_stops_when_told() -> None:
    metrics = Metrics()
    source = Counts({Status.PENDING: 2}, StoreUnavailable("down"), {Status.PENDING: 5})
    refresher = QueueDepthRefresher(source, metrics, interval=timedelta(0))
    source.when_exhausted = refresher.stop

    await asyncio.wait_for(refresher.run(), timeout=30)

    assert sample(metrics, "jobs_queue_depth", status="pending") == 5


@pytest.mark.parametrize("decision", ENDINGS, ids=lambda decision: decision.outcome.value)
def test_every_ending_is_observed_under_its_outcome_name(decision: Decision) -> None:
    # A new ending must find its place in the metrics' outcome table, not raise there.
    metrics = Metrics()
    metrics.attempt_finished(job(), decision, 0.1)
    assert (
        metrics.registry.get_sample_value(
            "job_processing_duration_seconds_count", {**SLEEP, "outcome": decision.outcome.value}
        )
        == 1
    )


def test_a_pairs_series_are_all_created_at_its_first_event_and_none_before() -> None:
    # Zeros rather than gaps: a dashboard's rate() of an outcome a type has not met yet is
    # 0 once the type ran at all; a pair never seen has no series (types and queues are
    # known only as jobs arrive).
    metrics = Metrics()
    assert sample_names(metrics, SLEEP) == set()

    metrics.attempt_started(job())

    for outcome in DECIDED:
        assert (
            metrics.registry.get_sample_value(
                "job_processing_duration_seconds_count", {**SLEEP, "outcome": outcome.value}
            )
            == 0
        )
    for name in ("jobs_retried_total", "jobs_lease_lost_total", "jobs_cancel_stops_total"):
        assert metrics.registry.get_sample_value(name, SLEEP) == 0
    for status in ("failed", "dead_letter"):
        labels = {**SLEEP, "status": status}
        assert metrics.registry.get_sample_value("jobs_failed_total", labels) == 0


def sample_names(metrics: Metrics, labels: dict[str, str]) -> set[str]:
    """The samples of `metrics` carrying `labels` (and maybe more)."""
    return {
        each.name
        for family in metrics.registry.collect()
        for each in family.samples
        if labels.items() <= each.labels.items()
    }


def test_each_queue_and_type_is_counted_apart() -> None:
    metrics = Metrics()
    mail: Pair = {"queue": "mail", "type": "email"}

    metrics.attempt_finished(job(), Decision.complete(), 0.1)
    metrics.attempt_finished(job(**mail), Decision.complete(), 0.1)
    metrics.attempt_finished(job(**mail), Decision.complete(), 0.1)
    metrics.lease_lost(job(queue="mail", type="sleep"))
    metrics.attempt_cancelled(job(**mail))
    metrics.outcome_retried(job(**mail), tries=3)
    metrics.outcome_unrecorded(job())

    assert sample(metrics, "jobs_completed_total", **SLEEP) == 1
    assert sample(metrics, "jobs_completed_total", **mail) == 2
    assert sample(metrics, "jobs_completed_total", queue="mail", type="sleep") == 0
    assert sample(metrics, "jobs_lease_lost_total", queue="mail", type="sleep") == 1
    assert sample(metrics, "jobs_lease_lost_total", **mail) == 0
    assert sample(metrics, "jobs_cancel_stops_total", **mail) == 1
    assert sample(metrics, "jobs_outcome_write_retries_total", **mail) == 2
    assert sample(metrics, "jobs_outcome_unrecorded_total", **SLEEP) == 1
    assert sample(metrics, "jobs_outcome_unrecorded_total", **mail) == 0


def test_pickup_latency_is_observed_per_started_attempt_from_due_to_claim() -> None:
    metrics = Metrics()
    due = datetime(2030, 1, 1, tzinfo=UTC)
    waited = replace(job(), run_at=due, started_at=due + timedelta(seconds=90))

    metrics.attempt_started(waited)
    metrics.attempt_started(replace(waited, started_at=due + timedelta(milliseconds=2)))

    assert sample(metrics, "job_pickup_latency_seconds_count", **SLEEP) == 2
    assert sample(metrics, "job_pickup_latency_seconds_sum", **SLEEP) == pytest.approx(90.002)
    assert sample(metrics, "job_pickup_latency_seconds_bucket", **SLEEP, le="0.001") == 0
    assert sample(metrics, "job_pickup_latency_seconds_bucket", **SLEEP, le="0.0025") == 1
    assert sample(metrics, "job_pickup_latency_seconds_bucket", **SLEEP, le="60.0") == 1
    assert sample(metrics, "job_pickup_latency_seconds_bucket", **SLEEP, le="120.0") == 2
