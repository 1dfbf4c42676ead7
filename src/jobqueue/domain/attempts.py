"""A job's attempts as an operator reads them: how each one ended, when, and where.

The store keeps the endings of earlier attempts with the job (`Job.attempt_log`, the
last `MAX_KEPT_ATTEMPTS`), written by the statement that ends each attempt the job
will outlive: a retry after a failure, a lease recovered, an operator's retry of a
finished job, and an operator's cancel of a running one. The attempt a job still holds
(running, or its final ending) is read from the job's own columns instead, so that the
common job, run once, writes no log at all. An attempt given back (shutdown, a snooze,
or claimed ahead and never started) is not counted, and not kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from jobqueue.domain.status import TRAITS, Phase, Status

MAX_KEPT_ATTEMPTS = 20


class Outcome(StrEnum):
    """What an attempt came to: the one vocabulary of the attempt history, logs, metrics
    and traces. An ending the worker decides is one of the first six (`Decision`); the
    history keeps those the job outlived or ended with, and the last three are what the
    worker reports of an attempt whose ending it could not write."""

    COMPLETED = "completed"
    # A retryable failure: the job is due again after a backoff.
    RETRIED = "retried"
    FAILED = "failed"
    DEAD_LETTER = "dead_letter"
    # Given back (shutdown, claimed ahead and never started): not counted, not kept.
    RELEASED = "released"
    # The handler said "not yet" (`Snooze`): not counted, not kept.
    SNOOZED = "snoozed"
    # Its lease ran out before it ended (its process died): recovery wrote this.
    LEASE_EXPIRED = "lease_expired"
    # An operator cancelled the job while it ran.
    CANCELLED = Status.CANCELLED.value
    # Still running.
    RUNNING = "running"
    # The worker lost its lease (recovered, or claimed again): nothing written.
    LEASE_LOST = "lease_lost"
    # Its ending could not be written before its lease ran out: left to recovery.
    UNRECORDED = "unrecorded"
    # Its thread still ran at shutdown: left to recovery, never released.
    ABANDONED = "abandoned"


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    # The job's attempt count when it ran (an operator's retry starts the count again).
    attempt: int
    # How it ended: retried, completed, failed, dead_letter, lease_expired, cancelled,
    # or running.
    outcome: Outcome
    error: str | None
    # When it was claimed, and when it ended (None while running), by the store's clock.
    started_at: datetime | None
    finished_at: datetime | None
    # The process that claimed it (host:pid).
    worker: str | None


def latest_attempt(
    status: Status,
    attempts: int,
    error: str | None,
    started_at: datetime | None,
    ended_at: datetime,
    worker: str | None,
) -> AttemptRecord | None:
    """The attempt a job in `status` still holds in its own columns, if any: the one
    running, or the final one of a job that ended (`ended_at` is its `updated_at`)."""
    if status is Status.PROCESSING:
        return AttemptRecord(attempts, Outcome.RUNNING, None, started_at, None, worker)
    if attempts == 0 or not holds_final_attempt(status):
        return None
    # last_error outlives the attempt that set it; a completed attempt had none.
    shown = None if status is Status.COMPLETED else error
    return AttemptRecord(attempts, Outcome(status.value), shown, started_at, ended_at, worker)


def holds_final_attempt(status: Status) -> bool:
    """Whether a job that ended in `status` keeps its final attempt in its own columns. A
    cancelled one does not: cancelling a running job logs the attempt it stopped, and a
    pending job's latest attempt, if it had one, was logged when it was retried."""
    return status is not Status.CANCELLED and TRAITS[status].phase is not Phase.LIVE


# The log holds the attempts a job outlived: one fewer than are kept, so that with the
# attempt the job still holds (`latest_attempt`) a job shows at most MAX_KEPT_ATTEMPTS.
LOGGED_ATTEMPTS = MAX_KEPT_ATTEMPTS - 1


def appended(log: tuple[AttemptRecord, ...], ended: AttemptRecord) -> tuple[AttemptRecord, ...]:
    """`log` with `ended` last, the oldest dropped past `LOGGED_ATTEMPTS`."""
    return (*log, ended)[-LOGGED_ATTEMPTS:]
