"""The seam tracing plugs into: one span per attempt, driven by the pool.

The telemetry layer implements it with OpenTelemetry (`adapters.telemetry.job_spans`);
without tracing the pool uses the null implementation here, which costs nothing worth
measuring.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Protocol

from jobqueue.domain.job import Job


class AttemptSpan(Protocol):
    def activate(self) -> AbstractContextManager[object]:
        """Make the span current; what the handler does inside belongs to it. Leaving
        does not end the span."""
        ...

    def record_error(self, error: BaseException) -> None:
        """The handler raised `error`."""

    def end(self, outcome: str, error: str | None) -> None:
        """The attempt is over and its outcome recorded (or not: `outcome` says);
        `error` is the job's error when the attempt failed."""


class AttemptTracer(Protocol):
    def start(self, job: Job, claim_started_ns: int, claim_ended_ns: int) -> AttemptSpan:
        """The span of the attempt about to run `job` (as claimed), whose claim ran
        between the two times (`time.time_ns()`)."""
        ...


class _NullSpan:
    def activate(self) -> AbstractContextManager[object]:
        return nullcontext()

    def record_error(self, error: BaseException) -> None:
        pass

    def end(self, outcome: str, error: str | None) -> None:
        pass


class NullTracer:
    """Traces nothing; the default when no tracing is wired in."""

    _span = _NullSpan()

    def start(self, job: Job, claim_started_ns: int, claim_ended_ns: int) -> AttemptSpan:
        return self._span
