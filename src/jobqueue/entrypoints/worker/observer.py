"""What the worker loops report as they go: the seam metrics plug into.

The pool and the maintenance loops call an observer; the telemetry layer implements one
with Prometheus counters. Observers are called inline on the event loop, so they must
be quick and must not block.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from jobqueue.domain.flow import Limit
from jobqueue.domain.job import Job
from jobqueue.domain.outcome import Decision

_log = logging.getLogger("jobqueue.worker")


class PoolObserver(Protocol):
    def attempt_started(self, job: Job) -> None:
        """A handler is about to run `job` (as claimed: `attempts` counts this attempt)."""

    def attempt_finished(self, job: Job, decision: Decision, duration_seconds: float) -> None:
        """The store recorded `decision` for the attempt that ran `job`.

        Not called when the write was refused (`lease_lost`) or failed: the store then
        holds whatever recovery or a newer claim decided, and counting it here too would
        count one attempt twice.
        """

    def lease_lost(self, job: Job) -> None:
        """The attempt lost its lease: a renewal or its outcome write was refused (the job
        was recovered or claimed again), or the lease ran out before a renewal got through.
        Its outcome is not written."""

    def attempt_cancelled(self, job: Job) -> None:
        """An operator cancelled `job` while this attempt ran it: the attempt is stopped,
        and nothing is written for it (the cancel ended the job)."""

    def outcome_retried(self, job: Job, tries: int) -> None:
        """The attempt's outcome was recorded, but only at try `tries` (the store failed
        before)."""

    def outcome_unrecorded(self, job: Job) -> None:
        """The attempt's outcome could not be written before its lease ran out; the job is
        left to lease recovery."""

    def recovered(self, jobs: Sequence[Job]) -> None:
        """Lease recovery moved `jobs` (as they are now) out of processing."""

    def claim_held_back(self, queue: str, limits: frozenset[Limit]) -> None:
        """A claim of `queue` took fewer jobs than it asked for because of `limits`."""


class NullObserver:
    """Observes nothing; the default when no telemetry is wired in."""

    def attempt_started(self, job: Job) -> None:
        pass

    def attempt_finished(self, job: Job, decision: Decision, duration_seconds: float) -> None:
        pass

    def lease_lost(self, job: Job) -> None:
        pass

    def attempt_cancelled(self, job: Job) -> None:
        pass

    def outcome_retried(self, job: Job, tries: int) -> None:
        pass

    def outcome_unrecorded(self, job: Job) -> None:
        pass

    def recovered(self, jobs: Sequence[Job]) -> None:
        pass

    def claim_held_back(self, queue: str, limits: frozenset[Limit]) -> None:
        pass


class GuardedObserver:
    """Delegates to an observer and logs what it raises.

    A failing metrics call must not abandon an attempt half-way, leaving its job
    processing until the lease runs out.
    """

    def __init__(self, inner: PoolObserver) -> None:
        self._inner = inner

    def attempt_started(self, job: Job) -> None:
        try:
            self._inner.attempt_started(job)
        except Exception:
            _log.exception("observer failed in attempt_started", extra={"job_id": str(job.id)})

    def attempt_finished(self, job: Job, decision: Decision, duration_seconds: float) -> None:
        try:
            self._inner.attempt_finished(job, decision, duration_seconds)
        except Exception:
            _log.exception("observer failed in attempt_finished", extra={"job_id": str(job.id)})

    def lease_lost(self, job: Job) -> None:
        try:
            self._inner.lease_lost(job)
        except Exception:
            _log.exception("observer failed in lease_lost", extra={"job_id": str(job.id)})

    def attempt_cancelled(self, job: Job) -> None:
        try:
            self._inner.attempt_cancelled(job)
        except Exception:
            _log.exception("observer failed in attempt_cancelled", extra={"job_id": str(job.id)})

    def outcome_retried(self, job: Job, tries: int) -> None:
        try:
            self._inner.outcome_retried(job, tries)
        except Exception:
            _log.exception("observer failed in outcome_retried", extra={"job_id": str(job.id)})

    def outcome_unrecorded(self, job: Job) -> None:
        try:
            self._inner.outcome_unrecorded(job)
        except Exception:
            _log.exception("observer failed in outcome_unrecorded", extra={"job_id": str(job.id)})

    def recovered(self, jobs: Sequence[Job]) -> None:
        try:
            self._inner.recovered(jobs)
        except Exception:
            _log.exception("observer failed in recovered")

    def claim_held_back(self, queue: str, limits: frozenset[Limit]) -> None:
        try:
            self._inner.claim_held_back(queue, limits)
        except Exception:
            _log.exception("observer failed in claim_held_back")


def guarded(observer: PoolObserver | None) -> PoolObserver:
    """`observer` (or a `NullObserver`) wrapped so that its failures are only logged."""
    return GuardedObserver(observer if observer is not None else NullObserver())


class FanOut:
    """Tells every one of `observers` (each guarded: one failing spares the others)."""

    def __init__(self, observers: Sequence[PoolObserver]) -> None:
        self._observers = tuple(GuardedObserver(observer) for observer in observers)

    def attempt_started(self, job: Job) -> None:
        for observer in self._observers:
            observer.attempt_started(job)

    def attempt_finished(self, job: Job, decision: Decision, duration_seconds: float) -> None:
        for observer in self._observers:
            observer.attempt_finished(job, decision, duration_seconds)

    def lease_lost(self, job: Job) -> None:
        for observer in self._observers:
            observer.lease_lost(job)

    def attempt_cancelled(self, job: Job) -> None:
        for observer in self._observers:
            observer.attempt_cancelled(job)

    def outcome_retried(self, job: Job, tries: int) -> None:
        for observer in self._observers:
            observer.outcome_retried(job, tries)

    def outcome_unrecorded(self, job: Job) -> None:
        for observer in self._observers:
            observer.outcome_unrecorded(job)

    def recovered(self, jobs: Sequence[Job]) -> None:
        for observer in self._observers:
            observer.recovered(jobs)

    def claim_held_back(self, queue: str, limits: frozenset[Limit]) -> None:
        for observer in self._observers:
            observer.claim_held_back(queue, limits)


def observing(*observers: PoolObserver | None) -> PoolObserver | None:
    """One observer telling each of `observers` that is not None (None for none)."""
    present = [observer for observer in observers if observer is not None]
    if len(present) <= 1:
        return present[0] if present else None
    return FanOut(present)
