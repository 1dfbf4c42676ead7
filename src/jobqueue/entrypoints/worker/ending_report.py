"""What a pool says of an attempt once it ended: the `job finished` line, the observer's
counts and the attempt's span, for an ending written (or not: its lease was lost, its
write gave up) and for an attempt that ended without an ending to write; and the one
WARNING line of a job that failed (`report_failure`), which lease recovery writes too."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from jobqueue.adapters.telemetry.logging import every_time, log_failure
from jobqueue.domain.attempts import Outcome
from jobqueue.domain.outcome import Decision
from jobqueue.domain.registry import StopReason
from jobqueue.domain.status import FAILURES, Status
from jobqueue.entrypoints.worker.attempt import Attempt
from jobqueue.entrypoints.worker.observer import PoolObserver
from jobqueue.entrypoints.worker.outcomes import WriteResult, Written

_log = logging.getLogger("jobqueue.worker")


def report_written(
    attempt: Attempt,
    decision: Decision,
    duration: float,
    result: WriteResult,
    observer: PoolObserver,
    *,
    observe: bool,
) -> None:
    """The write of `decision` settled as `result`; `observe`: count the ending (a job
    given back unstarted is not an attempt, and counts nowhere)."""
    job, fields, span = attempt.job, attempt.fields, attempt.span
    outcome = decision.outcome
    if result.written is Written.RECORDED:
        if observe:
            observer.attempt_finished(job, decision, duration)
        if result.tries > 1:
            observer.outcome_retried(job, result.tries)
        if decision.status in FAILURES:
            report_failure(fields, decision.status, job.attempts, decision.error)
    elif result.written is Written.LEASE_LOST:
        _log.warning(
            "lease lost: the job was recovered or claimed again; outcome %s dropped",
            outcome,
            extra=fields,
        )
        outcome = Outcome.LEASE_LOST
        observer.lease_lost(job)
    else:
        log_failure(
            _log,
            "recording outcome %s failed after %d tries; the job is left to lease recovery",
            result.error,
            outcome,
            result.tries,
            extra=fields,
        )
        outcome = Outcome.UNRECORDED
        observer.outcome_unrecorded(job)
    if _log.isEnabledFor(logging.INFO):
        _log.info(
            "job finished",
            extra={
                **fields,
                "outcome": outcome,
                "duration_ms": duration * 1000,
                "error": decision.error,
                "retry_in": _retry_in(decision),
                "tries": result.tries,
            },
        )
    if span is not None:
        span.end(outcome, decision.error)


def report_left(attempt: Attempt) -> None:
    """The attempt ended without an ending to write: its job was cancelled, its lease was
    lost, or shutdown gave up on its thread."""
    if attempt.stop.reason is StopReason.CANCELLED:
        _log.info(
            "job finished: cancelled while it ran; its handler was stopped",
            extra={**attempt.fields, "outcome": Outcome.CANCELLED},
        )
        if attempt.span is not None:
            attempt.span.end(Outcome.CANCELLED, None)
        return
    outcome = Outcome.LEASE_LOST if attempt.lost else Outcome.ABANDONED
    _log.warning(
        "job finished without an outcome: %s",
        "its lease was lost"
        if attempt.lost
        else "its thread still runs at shutdown; the job is left to lease recovery",
        extra={**attempt.fields, "outcome": outcome},
    )
    if attempt.span is not None:
        attempt.span.end(outcome, None)


# The most of an error's text the failure line repeats: enough to tell one failure from
# another; the whole of it is the job's last_error.
LOGGED_ERROR_LENGTH = 500


def report_failure(
    fields: Mapping[str, object], status: Status, attempts: int, error: str | None
) -> None:
    """The line to alert on: the job (`fields`) failed, and now `status` holds it after
    `attempts` attempts, the last ending with `error`. Written once per job, by the
    process that recorded the ending (a worker, or lease recovery) and only once it is
    recorded; never held back as a repeat, since each one wants a person."""
    text = error or ""
    if len(text) > LOGGED_ERROR_LENGTH:
        text = text[: LOGGED_ERROR_LENGTH - 1] + "…"
    extra = every_time({**fields, "status": status.value, "error": text})
    if status is Status.DEAD_LETTER:
        plural = "" if attempts == 1 else "s"
        _log.warning(
            "job dead-lettered after %d attempt%s: %s", attempts, plural, text, extra=extra
        )
    else:
        _log.warning("job %s: %s", status.value, text, extra=extra)


def _retry_in(decision: Decision) -> float | None:
    # Seconds until the job is due again: the backoff of a retry, 0 for a release.
    return None if decision.delay is None else decision.delay.total_seconds()
