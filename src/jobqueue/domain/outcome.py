"""How an attempt ended, and what the store must do about it: a pure decision.

The worker observes the ending, asks `decide`, and executes the answer with one fenced
store write (`JobStore.record_many`). It never chooses a status itself.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta

from jobqueue.domain.attempts import Outcome
from jobqueue.domain.backoff import Backoff
from jobqueue.domain.fields import MAX_DELAY, storable_text
from jobqueue.domain.job import Job
from jobqueue.domain.progress import Progress
from jobqueue.domain.status import Status
from jobqueue.domain.transitions import Operation, targets

MAX_ERROR_LENGTH = 4_000


# --- how an attempt ended -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Succeeded:
    """The handler returned: what it returned, as JSON text (the worker encodes it), or
    None when it returned nothing."""

    result: str | None = None


@dataclass(frozen=True, slots=True)
class Errored:
    """The handler raised. `permanent` comes from `errors.is_permanent`, `retry_after`
    (a floor for the backoff delay, such as a server's Retry-After) from
    `errors.retry_after`."""

    error: str
    permanent: bool
    retry_after: timedelta | None = None


@dataclass(frozen=True, slots=True)
class TimedOut:
    timeout: timedelta


@dataclass(frozen=True, slots=True)
class Interrupted:
    """Cancelled by shutdown: not the job's fault, so the attempt is given back."""


class Snooze(Exception):
    """Raise (or return) from a handler to say "not yet": the job goes back to pending and
    is due again `delay` from now (a `timedelta`, or seconds), without using up an
    attempt. A job snoozes at most MAX_DELAYS times; past that each snooze counts as an
    attempt, so a job that never gets ready still ends, dead-lettered."""

    def __init__(self, delay: timedelta | float) -> None:
        if not isinstance(delay, timedelta):
            if isinstance(delay, bool) or not isinstance(delay, int | float):
                raise TypeError(f"a snooze delay is a timedelta or seconds, got {delay!r}")
            delay = timedelta(seconds=delay)
        if not timedelta(0) <= delay <= MAX_DELAY:
            raise ValueError(f"a snooze delay must be between 0 and {MAX_DELAY}, got {delay}")
        super().__init__(f"snoozed for {delay.total_seconds():g}s")
        self.delay = delay


@dataclass(frozen=True, slots=True)
class Snoozed:
    """The handler said "not yet" (`Snooze`): due again after `delay`."""

    delay: timedelta


Ending = Succeeded | Errored | TimedOut | Interrupted | Snoozed


# --- what to do next ------------------------------------------------------------------


# What recovery records on a job whose lease ran out before its attempt ended.
LEASE_EXPIRED_ERROR = (
    "lease expired before the attempt finished: the process running it probably died"
)


@dataclass(frozen=True, slots=True)
class Decision:
    """The one write that ends an attempt: every ending is this shape, so one fenced store
    statement applies any of them. Build it with the named constructors below, the only
    place where an ending's operation, outcome name and fields are chosen.
    """

    operation: Operation
    outcome: Outcome
    # Recorded as the job's last_error; None leaves the previous one in place.
    error: str | None = None
    # Due again this long after the write, by the store's clock; None keeps run_at.
    delay: timedelta | None = None
    # The attempt counted at claim time is given back (shutdown is not the job's fault).
    gives_back_attempt: bool = False
    # Counted as one more of the job's snoozes (`Job.snoozes`).
    snoozed: bool = False
    # What the handler returned, as JSON text (a completion's); None writes nothing.
    result: str | None = None
    # The attempt's last progress report not written yet (`with_progress`): written with
    # the ending, so the job keeps the last one its handler made.
    progress: Progress | None = None

    @property
    def status(self) -> Status:
        """Where the job goes: the one target the transition table allows."""
        return _ENDING_TARGETS[self.operation]

    @classmethod
    def complete(cls, result: str | None = None) -> Decision:
        return cls(Operation.COMPLETE, Outcome.COMPLETED, result=result)

    def with_progress(self, progress: Progress | None) -> Decision:
        """This decision, writing also the attempt's last `progress` report."""
        return self if progress is None else replace(self, progress=progress)

    @classmethod
    def backoff(cls, delay: timedelta, error: str) -> Decision:
        if delay < timedelta(0):
            raise ValueError(f"a backoff delay must not be negative, got {delay}")
        return cls(Operation.BACKOFF, Outcome.RETRIED, _storable(error), delay)

    @classmethod
    def fail(cls, error: str) -> Decision:
        return cls(Operation.FAIL, Outcome.FAILED, _storable(error))

    @classmethod
    def dead_letter(cls, error: str) -> Decision:
        return cls(Operation.DEAD_LETTER, Outcome.DEAD_LETTER, _storable(error))

    @classmethod
    def release(cls) -> Decision:
        return cls(Operation.RELEASE, Outcome.RELEASED, delay=timedelta(0), gives_back_attempt=True)

    @classmethod
    def snooze(cls, delay: timedelta) -> Decision:
        if delay < timedelta(0):
            raise ValueError(f"a snooze delay must not be negative, got {delay}")
        return cls(
            Operation.SNOOZE, Outcome.SNOOZED, delay=delay, gives_back_attempt=True, snoozed=True
        )


def _only_target(operation: Operation) -> Status:
    (target,) = targets(operation, Status.PROCESSING)
    return target


# Every ending leaves processing for exactly one status (recovery, which may reach two,
# is not an ending an attempt decides).
_ENDING_TARGETS = {
    operation: _only_target(operation)
    for operation in (
        Operation.COMPLETE,
        Operation.BACKOFF,
        Operation.FAIL,
        Operation.DEAD_LETTER,
        Operation.RELEASE,
        Operation.SNOOZE,
    )
}

# How often a job may snooze before its snoozes count as attempts (the MAX_SNOOZES
# setting), and the most that setting may say.
DEFAULT_MAX_SNOOZES = 100
MAX_SNOOZES = 1_000_000


def decide(
    job: Job,
    ending: Ending,
    backoff: Backoff,
    rand: Callable[[], float] = random.random,
    max_snoozes: int = DEFAULT_MAX_SNOOZES,
) -> Decision:
    """The next step for `job` as claimed (its `attempts` already counts this attempt)."""
    match ending:
        case Snoozed(delay=delay) if job.snoozes < max_snoozes:
            return Decision.snooze(delay)
        case Snoozed(delay=delay):
            # Past the bound the snooze costs the attempt: a job that is never ready
            # runs out of attempts and is dead-lettered instead of snoozing forever.
            message = f"snoozed {job.snoozes} times, the most allowed (MAX_SNOOZES)"
            return _retry_or_dead_letter(job, message, backoff, rand, delay)
        case Succeeded(result=result):
            return Decision.complete(result)
        case Interrupted():
            return Decision.release()
        case Errored(error=error, permanent=True):
            return Decision.fail(error)
        case Errored(error=error, retry_after=floor):
            return _retry_or_dead_letter(job, error, backoff, rand, floor)
        case TimedOut(timeout=timeout):
            message = f"attempt timed out after {timeout.total_seconds():g}s"
            return _retry_or_dead_letter(job, message, backoff, rand)


def _retry_or_dead_letter(
    job: Job,
    error: str,
    backoff: Backoff,
    rand: Callable[[], float],
    floor: timedelta | None = None,
) -> Decision:
    if job.is_last_attempt:
        return Decision.dead_letter(error)
    delay = backoff.delay(job.attempts, rand)
    if floor is not None and floor > delay:
        delay = floor
    return Decision.backoff(delay, error)


def _storable(error: str) -> str:
    """`error` as last_error keeps it (`storable_text`). Error texts come from whatever a
    handler raised (an undecodable file name, say), and last_error is for people reading
    a dashboard: a multi-megabyte message helps nobody."""
    return storable_text(error, MAX_ERROR_LENGTH)


# The outcomes an attempt's ending may be decided as: one per named constructor.
DECIDED: frozenset[Outcome] = frozenset(
    decision.outcome
    for decision in (
        Decision.complete(),
        Decision.backoff(timedelta(0), ""),
        Decision.fail(""),
        Decision.dead_letter(""),
        Decision.release(),
        Decision.snooze(timedelta(0)),
    )
)
