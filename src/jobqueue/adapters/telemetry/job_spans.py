"""The `job.attempt` span of each attempt, in the trace of the request that submitted it.

Each attempt is a CONSUMER span whose parent is the submitting span, extracted from the
job's stored `traceparent`; a retry's next attempt is another such span, so the trace
shows the submission and every attempt under it. A job submitted outside any trace
starts a new trace at each attempt.

Attributes:
- `jobqueue.job.id`, `jobqueue.job.type`, `jobqueue.job.attempt`,
  `jobqueue.job.max_attempts`;
- `jobqueue.job.queue_wait_ms`: how long the job was due before a worker claimed it
  (`Job.pickup_latency`: claim time minus `run_at`, or minus `created_at` if later, both
  read from the database clock). `run_at` is the submission for a first attempt and the
  end of the backoff for a retry, so a retry's deliberate delay is not counted as waiting;
- `jobqueue.job.outcome`: completed, retried, failed, dead_letter or released (and
  lease_lost or unrecorded when the store did not take the outcome).

An attempt that ended in error has status ERROR, described by the job's error, and the
handler's exception recorded as an event.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from jobqueue.adapters.telemetry.trace_context import context_from_traceparent
from jobqueue.domain.job import Job
from jobqueue.release import package_version

ATTEMPT_SPAN = "job.attempt"
CLAIM_SPAN = "job.claim"
JOB_ID = "jobqueue.job.id"
JOB_TYPE = "jobqueue.job.type"
JOB_ATTEMPT = "jobqueue.job.attempt"
JOB_MAX_ATTEMPTS = "jobqueue.job.max_attempts"
JOB_QUEUE_WAIT_MS = "jobqueue.job.queue_wait_ms"
JOB_OUTCOME = "jobqueue.job.outcome"


class JobSpans:
    """Traces the worker pool's attempts (its `AttemptTracer`)."""

    def __init__(self, provider: trace.TracerProvider) -> None:
        self._tracer = provider.get_tracer("jobqueue.worker", package_version())

    def start(self, job: Job, claim_started_ns: int, claim_ended_ns: int) -> OtelAttemptSpan:
        """The span of the attempt about to run `job` (as claimed), begun when its claim
        began, with the claim as its first child: a slow claim shows in the job's trace,
        though the statement ran before anyone knew which job it would return."""
        span = self._tracer.start_span(
            ATTEMPT_SPAN,
            context=context_from_traceparent(job.traceparent),
            kind=SpanKind.CONSUMER,
            attributes={
                JOB_ID: str(job.id),
                JOB_TYPE: job.type,
                JOB_ATTEMPT: job.attempts,
                JOB_MAX_ATTEMPTS: job.max_attempts,
                JOB_QUEUE_WAIT_MS: queue_wait_ms(job),
            },
            start_time=claim_started_ns,
        )
        if span.is_recording():
            claim = self._tracer.start_span(
                CLAIM_SPAN,
                context=trace.set_span_in_context(span),
                start_time=claim_started_ns,
            )
            claim.end(end_time=claim_ended_ns)
        return OtelAttemptSpan(span)


class OtelAttemptSpan:
    """One attempt's span, as the pool drives it: current while the handler runs, ended
    once the outcome is recorded (so the outcome write is inside it)."""

    def __init__(self, span: Span) -> None:
        self._span = span

    def activate(self) -> AbstractContextManager[object]:
        """Make the span current: the handler's own spans, database statements and log
        lines belong to it. Leaving does not end it; `end` does."""
        # Errors are reported through `record_error` and `end`, which know which are
        # the job's; a cancellation passing through is the pool's shutdown, not one.
        return trace.use_span(
            self._span, end_on_exit=False, record_exception=False, set_status_on_exception=False
        )

    def record_error(self, error: BaseException) -> None:
        self._span.record_exception(error)

    def end(self, outcome: str, error: str | None) -> None:
        self._span.set_attribute(JOB_OUTCOME, outcome)
        if error is not None:
            self._span.set_status(Status(StatusCode.ERROR, error))
        self._span.end()


def queue_wait_ms(job: Job) -> float:
    """`Job.pickup_latency`, as the metrics' `job_pickup_latency_seconds` measures it."""
    latency = job.pickup_latency
    return 0.0 if latency is None else latency.total_seconds() * 1000
