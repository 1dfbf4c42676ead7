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

from jobqueue.domain.status import TRAITS, Phase, Status

MAX_KEPT_ATTEMPTS = 20

# The outcome of an attempt whose lease ran out before it ended (its process died).
LEASE_EXPIRED = "lease_expired"
# The outcome of an attempt still running.
RUNNING = "running"
# The outcome of an attempt stopped by an operator's cancel.
CANCELLED = Status.CANCELLED.value


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    # The job's attempt count when it ran (an operator's retry starts the count again).
    attempt: int
    # `Outcome`'s name for how it ended (`retried`, `completed`, `failed`,
    # `dead_letter`), `lease_expired`, `cancelled`, or `running`.
    outcome: str
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
        return AttemptRecord(attempts, RUNNING, None, started_at, None, worker)
    if attempts == 0 or not holds_final_attempt(status):
        return None
    # last_error outlives the attempt that set it; a completed attempt had none.
    shown = None if status is Status.COMPLETED else error
    return AttemptRecord(attempts, status.value, shown, started_at, ended_at, worker)


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
