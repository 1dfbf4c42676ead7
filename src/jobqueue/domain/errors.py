"""The project's exceptions and the rule that splits failures into retryable and not.

Every error the library raises on purpose derives from `JobQueueError`, so callers can
catch one type. `Permanent` and `Transient` are different: handlers raise them (or
subclasses, or wrap them) to say "retrying cannot help", or "this failure was foreseen,
try again later". Both are expected endings, logged without a traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from uuid import UUID


class JobQueueError(Exception):
    """Base class of the errors jobqueue raises on purpose."""


class InvalidJob(JobQueueError):
    """A job submission that can never be accepted as sent; the message says why."""


class UnknownJobType(InvalidJob):
    def __init__(self, job_type: str, known: list[str]) -> None:
        listing = ", ".join(repr(name) for name in sorted(known)) or "none registered"
        super().__init__(f"unknown job type {job_type!r} (known types: {listing})")
        self.job_type = job_type


class InvalidPayload(InvalidJob):
    def __init__(self, job_type: str, reason: str) -> None:
        super().__init__(f"invalid payload for job type {job_type!r}: {reason}")
        self.job_type = job_type
        self.reason = reason


class JobNotFound(JobQueueError):
    def __init__(self, job_id: UUID) -> None:
        super().__init__(f"job {job_id} not found")
        self.job_id = job_id


class IdempotencyConflict(JobQueueError):
    def __init__(self, key: str) -> None:
        super().__init__(
            f"Idempotency-Key {key!r} was already used for a different request "
            "(another type, payload or max_attempts)"
        )
        self.key = key


# What a person reading an error calls each operation, where it differs from its name.
_SPOKEN_OPERATIONS = {"dead_letter": "dead-letter"}
_HINTS = {
    "retry": "; only failed, dead-lettered and cancelled jobs can be retried",
    "cancel": "; only pending and running jobs can be cancelled",
    "reschedule": "; only pending jobs can be rescheduled or run now",
    "delete": "; a running job cannot be deleted: cancel it first",
}


class InvalidTransition(JobQueueError):
    def __init__(self, job_id: UUID, operation: str, status: str) -> None:
        spoken = _SPOKEN_OPERATIONS.get(operation, operation)
        hint = _HINTS.get(operation, "")
        super().__init__(f"cannot {spoken} job {job_id}: it is {status}{hint}")
        self.job_id = job_id
        self.operation = operation
        self.status = status


class UniqueKeyHeld(JobQueueError):
    """An operator's retry would bring back a unique job whose key another job holds
    now (in a status the key counts in): two would be live at once."""

    def __init__(self, job_id: UUID | None) -> None:
        what = "these jobs: one of them has" if job_id is None else f"job {job_id}: it has"
        super().__init__(
            f"cannot retry {what} a unique key another job holds now; cancel or finish "
            "that one first"
        )
        self.job_id = job_id


class LeaseLost(JobQueueError):
    """An outcome write found the job no longer held by the caller's claim.

    The lease expired and the job was recovered, or another claim superseded it; the
    newer owner's outcome wins and the stale one is dropped.
    """

    def __init__(self, job_id: UUID, lease_token: int) -> None:
        super().__init__(f"lease {lease_token} on job {job_id} was lost")
        self.job_id = job_id
        self.lease_token = lease_token


class NotEnded(JobQueueError, TimeoutError):
    """A wait for a job's end (`wait`) ran out of time first: the job is still `status`."""

    def __init__(self, job_id: UUID, status: str, waited: float) -> None:
        super().__init__(f"job {job_id} has not ended after {waited:g}s: it is {status}")
        self.job_id = job_id
        self.status = status


class StoreUnavailable(JobQueueError):
    """The job store could not be reached or failed for a reason that is not the caller's."""


class StoreError(JobQueueError):
    """The job store refused a statement, or its driver how it was used, for a reason
    that retrying cannot fix: SQL it does not accept, an object that does not exist, a
    constraint or data violation, an internal error. A bug in jobqueue or a schema it
    does not expect, never the caller's and never an outage; `sqlstate` is PostgreSQL's
    code for it ('' when the driver gave none).

    A sibling of `StoreUnavailable`, not a kind of it and with no common base but
    `JobQueueError`: the one question callers ask of a store failure is "will trying
    again help?", and a shared base would invite `except` clauses that retry bugs.
    """

    def __init__(self, message: str, sqlstate: str = "") -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


class Permanent(Exception):
    """Raise (or subclass, or chain with `raise X from Permanent(...)`) to stop retries.

    Any other exception escaping a handler is retried while attempts remain.
    """


class Transient(Exception):
    """Raise (or subclass) for a failure the handler foresaw and a later attempt may not
    meet: a network error, a receiver that is busy. Retried like any other exception
    (the next attempt waits at least `retry_after`, when given), but logged at INFO
    without a traceback, since nothing in the handler went wrong."""

    def __init__(self, message: str, *, retry_after: timedelta | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def is_expected(error: BaseException) -> bool:
    """Whether `error` is an ending the handler (or the payload's check) meant: the
    message says it all, a traceback would only bury it."""
    return any(isinstance(each, Permanent | InvalidJob | Transient) for each in _wrapped(error))


def is_permanent(error: BaseException) -> bool:
    """Whether `error` says retrying is pointless.

    Wrapping must not hide the verdict: the explicit `__cause__` chain is followed, and an
    exception group is permanent when any exception inside it is, because retrying the
    group would run into that same failure again.
    """
    return any(isinstance(each, Permanent | InvalidJob) for each in _wrapped(error))


def retry_after(error: BaseException) -> timedelta | None:
    """The longest wait any exception in `error` asks for through a `retry_after`
    attribute (a `timedelta`), e.g. a server's `Retry-After`; found through the same
    wrapping as `is_permanent`. The next attempt waits at least this long."""
    floors = [getattr(each, "retry_after", None) for each in _wrapped(error)]
    return max((floor for floor in floors if isinstance(floor, timedelta)), default=None)


def _wrapped(error: BaseException) -> Iterator[BaseException]:
    """`error`, its explicit causes and the members of exception groups, each once."""
    seen: set[int] = set()
    pending: list[BaseException] = [error]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        if current.__cause__ is not None:
            pending.append(current.__cause__)
