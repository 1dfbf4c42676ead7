"""Prometheus metrics: the job counters and histograms by queue and type, queue depth.

Every metric lives in a `CollectorRegistry` owned by one `Metrics` object, created by the
composition root, so several apps in one process (tests) never collide over names.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)

from jobqueue.domain.attempts import Outcome
from jobqueue.domain.flow import Limit
from jobqueue.domain.job import Job
from jobqueue.domain.outcome import DECIDED, Decision
from jobqueue.domain.status import COUNTED, PRUNABLE, Status

_log = logging.getLogger(__name__)

EXPOSITION_CONTENT_TYPE = CONTENT_TYPE_LATEST

# Attempts run from milliseconds (no-op jobs) to minutes (JOB_TIMEOUT); the buckets cover
# both ends rather than the library's web-request defaults.
_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
# A job waits for a worker from a claim's round trip (milliseconds) to a backlog's hour.
_PICKUP_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
    600, 1800, 3600,
)  # fmt: skip

# The labels of every metric counted per job. Both are bounded sets: a job is counted only
# once a worker claimed it, so its type is a handler's name and its queue one that workers
# consume (QUEUES); no client adds a series by submitting to a name of its own.
JOB_LABELS = ("queue", "type")


@dataclass(frozen=True, slots=True)
class JobSeries:
    """Every labelled child of one (queue, type), created together at its first event: a
    dashboard sees zeros, not gaps, for whatever has not happened yet to a type that ran.
    Kept per pair because `labels()` formats its values and takes a lock at every call,
    too much for each attempt's few events."""

    by_outcome: Mapping[Outcome, Counter | None]
    duration: Mapping[Outcome, Histogram]
    pickup: Histogram
    dead_lettered: Counter
    recovered: Counter
    lease_lost: Counter
    cancel_stops: Counter
    outcome_retries: Counter
    unrecorded: Counter


class Metrics:
    """The service's metrics; also the worker pool's observer (`PoolObserver`)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        ProcessCollector(registry=self.registry)
        self._submitted = Counter(
            "jobs_submitted",
            "Jobs created by a submission (idempotent replays excluded).",
            registry=self.registry,
        )
        self._duplicates = Counter(
            "jobs_unique_duplicates",
            "Unique submissions answered with the job already holding their key.",
            registry=self.registry,
        )
        self._cancelled = Counter(
            "jobs_cancelled",
            "Jobs cancelled by an operator, pending or running.",
            registry=self.registry,
        )
        # Labelled by queue and limit: both bounded (queues workers consume, five limits).
        self._held_back = Counter(
            "claims_held_back",
            "Claims that took fewer jobs than they asked for because a queue's limit "
            "(concurrency, rate, key_concurrency, key_rate or type_rate) held the rest back.",
            ("queue", "limit"),
            registry=self.registry,
        )
        self._completed = self._per_job("jobs_completed", "Attempts that completed their job.")
        self._failed = self._per_job(
            "jobs_failed",
            "Jobs that ended without success, by the status they ended in.",
            "status",
        )
        self._retried = self._per_job(
            "jobs_retried", "Failed attempts scheduled for another try after a backoff."
        )
        self._snoozed = self._per_job(
            "jobs_snoozed",
            "Attempts whose handler said not yet (Snooze): the job waits, the attempt given back.",
        )
        self._cancel_stops = self._per_job(
            "jobs_cancel_stops",
            "Running attempts this process stopped because their job was cancelled.",
        )
        self._recovered = self._per_job(
            "jobs_recovered",
            "Jobs whose lease expired (their worker died or hung) and were recovered.",
        )
        self._lease_lost = self._per_job(
            "jobs_lease_lost", "Outcome writes dropped because the job's lease had been lost."
        )
        self._outcome_retries = self._per_job(
            "jobs_outcome_write_retries",
            "Outcome writes tried again after the store failed (tries beyond the first).",
        )
        self._unrecorded = self._per_job(
            "jobs_outcome_unrecorded",
            "Outcomes not written before their lease ran out; their jobs went to recovery.",
        )
        self._duration = Histogram(
            "job_processing_duration_seconds",
            "Duration of attempts, by outcome.",
            [*JOB_LABELS, "outcome"],
            buckets=_DURATION_BUCKETS,
            registry=self.registry,
        )
        self._pickup = Histogram(
            "job_pickup_latency_seconds",
            "From a job being due to its attempt starting (the claim), on the database clock.",
            JOB_LABELS,
            buckets=_PICKUP_BUCKETS,
            registry=self.registry,
        )
        self._queue_depth = Gauge(
            "jobs_queue_depth",
            "Jobs pending, processing or dead-lettered, refreshed every few seconds.",
            ["status"],
            registry=self.registry,
        )
        self._pruned = Counter(
            "jobs_pruned",
            "Finished jobs deleted by retention, by the status they had.",
            ["status"],
            registry=self.registry,
        )
        for status in PRUNABLE:
            self._pruned.labels(status=status.value)
        self._series: dict[tuple[str, str], JobSeries] = {}

    def _per_job(self, name: str, documentation: str, *labels: str) -> Counter:
        return Counter(name, documentation, [*JOB_LABELS, *labels], registry=self.registry)

    def series(self, job: Job) -> JobSeries:
        """The children counting `job`'s (queue, type), all created at the pair's first
        event."""
        key = (job.queue, job.type)
        found = self._series.get(key)
        if found is None:
            found = self._series[key] = self._new_series(*key)
        return found

    def _new_series(self, queue: str, type: str) -> JobSeries:
        pair = {"queue": queue, "type": type}
        dead_lettered = self._failed.labels(**pair, status=Status.DEAD_LETTER.value)
        return JobSeries(
            # The counter each recorded outcome moves; a release gives the attempt back
            # and counts nowhere.
            by_outcome={
                Outcome.COMPLETED: self._completed.labels(**pair),
                Outcome.RETRIED: self._retried.labels(**pair),
                Outcome.FAILED: self._failed.labels(**pair, status=Status.FAILED.value),
                Outcome.DEAD_LETTER: dead_lettered,
                Outcome.RELEASED: None,
                Outcome.SNOOZED: self._snoozed.labels(**pair),
            },
            duration={
                outcome: self._duration.labels(**pair, outcome=outcome.value) for outcome in DECIDED
            },
            pickup=self._pickup.labels(**pair),
            dead_lettered=dead_lettered,
            recovered=self._recovered.labels(**pair),
            lease_lost=self._lease_lost.labels(**pair),
            cancel_stops=self._cancel_stops.labels(**pair),
            outcome_retries=self._outcome_retries.labels(**pair),
            unrecorded=self._unrecorded.labels(**pair),
        )

    @property
    def content_type(self) -> str:
        """The media type `render`'s text is served as."""
        return EXPOSITION_CONTENT_TYPE

    def render(self) -> bytes:
        """The exposition text of every metric in this registry."""
        return generate_latest(self.registry)

    def job_submitted(self) -> None:
        self._submitted.inc()

    def job_duplicate(self) -> None:
        self._duplicates.inc()

    def jobs_cancelled(self, count: int) -> None:
        self._cancelled.inc(count)

    # --- PoolObserver -----------------------------------------------------------------

    def attempt_started(self, job: Job) -> None:
        latency = job.pickup_latency
        series = self.series(job)
        if latency is not None:
            series.pickup.observe(latency.total_seconds())

    def attempt_finished(self, job: Job, decision: Decision, duration_seconds: float) -> None:
        series = self.series(job)
        series.duration[decision.outcome].observe(duration_seconds)
        counter = series.by_outcome[decision.outcome]
        if counter is not None:
            counter.inc()

    def lease_lost(self, job: Job) -> None:
        self.series(job).lease_lost.inc()

    def attempt_cancelled(self, job: Job) -> None:
        self.series(job).cancel_stops.inc()

    def outcome_retried(self, job: Job, tries: int) -> None:
        self.series(job).outcome_retries.inc(tries - 1)

    def outcome_unrecorded(self, job: Job) -> None:
        self.series(job).unrecorded.inc()

    def claim_held_back(self, queue: str, limits: frozenset[Limit]) -> None:
        for limit in limits:
            self._held_back.labels(queue, limit.value).inc()

    def recovered(self, jobs: Iterable[Job]) -> None:
        for job in jobs:
            series = self.series(job)
            series.recovered.inc()
            # A recovered job on its last attempt ends dead-lettered: count it with the
            # dead letters that workers write themselves.
            if job.status is Status.DEAD_LETTER:
                series.dead_lettered.inc()

    # --- retention --------------------------------------------------------------------

    def jobs_pruned(self, status: Status, count: int) -> None:
        self._pruned.labels(status=status.value).inc(count)

    # --- queue depth ------------------------------------------------------------------

    def set_queue_depth(self, counts: Mapping[Status, int]) -> None:
        """Set each counted status (`status.COUNTED`: absent ones to 0); other statuses
        are not depth and are ignored."""
        for status in COUNTED:
            self._queue_depth.labels(status=status.value).set(counts.get(status, 0))


class QueueDepthSource(Protocol):
    async def count_by_status(self) -> Mapping[Status, int]:
        """How many jobs the store holds in each counted status (`status.COUNTED`;
        absent statuses hold none)."""
        ...


class QueueDepthRefresher:
    """Keeps `jobs_queue_depth` current from a loop, never from inside a scrape.

    prometheus-client collects synchronously, so a collector that queried the database
    would block the event loop; a scrape shows values at most `interval` old instead.
    """

    def __init__(
        self,
        source: QueueDepthSource,
        metrics: Metrics,
        *,
        interval: timedelta = timedelta(seconds=5),
        timeout: timedelta = timedelta(seconds=2),
    ) -> None:
        self._source = source
        self._metrics = metrics
        self._interval = interval.total_seconds()
        self._timeout = timeout.total_seconds()
        self._stopping = asyncio.Event()

    async def refresh(self) -> None:
        async with asyncio.timeout(self._timeout):
            counts = await self._source.count_by_status()
        self._metrics.set_queue_depth(counts)

    async def run(self) -> None:
        while not self._stopping.is_set():
            try:
                await self.refresh()
            except Exception as error:
                # An unreachable database shows in /readyz and in the store's own
                # errors; here it only means the gauge keeps its last values.
                _log.warning(
                    "queue depth refresh failed", extra={"error": f"{type(error).__name__}"}
                )
            try:
                async with asyncio.timeout(self._interval):
                    await self._stopping.wait()
            except TimeoutError:
                pass

    def stop(self) -> None:
        self._stopping.set()
