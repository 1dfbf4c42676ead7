"""How an attempt ended, and what the store must do about it: a pure decision.

The worker observes the ending, asks `decide`, and executes the answer with one fenced
store write. It never chooses a status itself.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from jobqueue.domain.backoff import Backoff
from jobqueue.domain.job import Job, Operation

MAX_ERROR_LENGTH = 4_000


# --- how an attempt ended -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Succeeded:
    pass


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


Ending = Succeeded | Errored | TimedOut | Interrupted


# --- what to do next ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Complete:
    operation = Operation.COMPLETE


@dataclass(frozen=True, slots=True)
class Retry:
    delay: timedelta
    error: str
    operation = Operation.RETRY


@dataclass(frozen=True, slots=True)
class Fail:
    error: str
    operation = Operation.FAIL


@dataclass(frozen=True, slots=True)
class DeadLetter:
    error: str
    operation = Operation.DEAD_LETTER


@dataclass(frozen=True, slots=True)
class Release:
    operation = Operation.RELEASE


Decision = Complete | Retry | Fail | DeadLetter | Release


def outcome_name(decision: Decision) -> str:
    """How logs, metrics and traces name what an attempt came to."""
    match decision:
        case Complete():
            return "completed"
        case Retry():
            return "retried"
        case Fail():
            return "failed"
        case DeadLetter():
            return "dead_letter"
        case Release():
            return "released"


def decide(
    job: Job,
    ending: Ending,
    backoff: Backoff,
    rand: Callable[[], float] = random.random,
) -> Decision:
    """The next step for `job` as claimed (its `attempts` already counts this attempt)."""
    match ending:
        case Succeeded():
            return Complete()
        case Interrupted():
            return Release()
        case Errored(error=error, permanent=True):
            return Fail(_clip(error))
        case Errored(error=error, retry_after=floor):
            return _retry_or_dead_letter(job, _clip(error), backoff, rand, floor)
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
        return DeadLetter(error)
    delay = backoff.delay(job.attempts, rand)
    if floor is not None and floor > delay:
        delay = floor
    return Retry(delay, error)


def _clip(error: str) -> str:
    # last_error is for people reading a dashboard; a multi-megabyte message helps nobody.
    if len(error) <= MAX_ERROR_LENGTH:
        return error
    return error[: MAX_ERROR_LENGTH - 1] + "…"
