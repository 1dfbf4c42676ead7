"""`RecordingObserver`: a `PoolObserver` that keeps every call, for assertions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from jobqueue.domain.flow import Limit
from jobqueue.domain.job import Job
from jobqueue.domain.outcome import Decision


@dataclass
class RecordingObserver:
    """`PoolObserver` that keeps every call, for assertions."""

    started: list[Job] = field(default_factory=list)
    finished: list[tuple[Job, Decision, float]] = field(default_factory=list)
    lost: list[Job] = field(default_factory=list)
    cancelled: list[Job] = field(default_factory=list)
    retried_writes: list[tuple[Job, int]] = field(default_factory=list)
    unrecorded: list[Job] = field(default_factory=list)
    recoveries: list[list[Job]] = field(default_factory=list)
    held_back: list[tuple[str, frozenset[Limit]]] = field(default_factory=list)

    def attempt_started(self, job: Job) -> None:
        self.started.append(job)

    def attempt_finished(self, job: Job, decision: Decision, duration_seconds: float) -> None:
        self.finished.append((job, decision, duration_seconds))

    def lease_lost(self, job: Job) -> None:
        self.lost.append(job)

    def attempt_cancelled(self, job: Job) -> None:
        self.cancelled.append(job)

    def outcome_retried(self, job: Job, tries: int) -> None:
        self.retried_writes.append((job, tries))

    def outcome_unrecorded(self, job: Job) -> None:
        self.unrecorded.append(job)

    def recovered(self, jobs: Sequence[Job]) -> None:
        self.recoveries.append(list(jobs))

    def claim_held_back(self, queue: str, limits: frozenset[Limit]) -> None:
        self.held_back.append((queue, limits))
