"""The `job.attempt` span: parent, attributes, claim child, outcome and status."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from jobqueue.adapters.telemetry.job_spans import JobSpans, queue_wait_ms
from jobqueue.domain.job import Job
from jobqueue.domain.status import Status

TRACE_ID = 0x0AF7651916CD43DD8448EB211C80319C
PARENT_ID = 0xB7AD6B7169203331
TRACEPARENT = f"00-{TRACE_ID:032x}-{PARENT_ID:016x}-01"
CREATED = datetime(2030, 1, 1, tzinfo=UTC)


def claimed_job(
    *, traceparent: str | None = TRACEPARENT, waited: timedelta = timedelta(0), attempt: int = 1
) -> Job:
    run_at = CREATED
    return Job(
        id=uuid.uuid4(),
        type="email",
        payload={},
        status=Status.PROCESSING,
        attempts=attempt,
        max_attempts=3,
        run_at=run_at,
        locked_until=run_at + waited + timedelta(minutes=1),
        lease_token=attempt,
        last_error=None,
        idempotency_key=None,
        created_at=CREATED,
        updated_at=run_at + waited,
        started_at=run_at + waited,
        traceparent=traceparent,
    )


class Recorder:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.spans = JobSpans(self.provider)

    def finished(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.exporter.get_finished_spans() if span.name == name]


def run_attempt(
    recorder: Recorder,
    job: Job,
    outcome: str = "completed",
    error: str | None = None,
    raised: BaseException | None = None,
) -> ReadableSpan:
    claim_started = time.time_ns()
    attempt = recorder.spans.start(job, claim_started, claim_started + 1_000)
    with attempt.activate():
        if raised is not None:
            attempt.record_error(raised)
    attempt.end(outcome, error)
    (span,) = recorder.finished("job.attempt")
    return span


def test_attempt_is_a_consumer_span_child_of_the_submission() -> None:
    span = run_attempt(Recorder(), claimed_job())
    assert span.kind is SpanKind.CONSUMER
    assert span.context is not None
    assert span.parent is not None
    assert span.context.trace_id == TRACE_ID
    assert span.parent.span_id == PARENT_ID


def test_attempt_carries_the_job_attributes() -> None:
    job = claimed_job(waited=timedelta(milliseconds=1500), attempt=2)
    span = run_attempt(Recorder(), job, "retried", "ValueError: boom")
    assert dict(span.attributes or {}) == {
        "jobqueue.job.id": str(job.id),
        "jobqueue.job.type": "email",
        "jobqueue.job.attempt": 2,
        "jobqueue.job.max_attempts": 3,
        "jobqueue.job.queue_wait_ms": 1500.0,
        "jobqueue.job.outcome": "retried",
    }


def test_successful_attempt_has_no_error_status() -> None:
    span = run_attempt(Recorder(), claimed_job())
    assert span.status.status_code is StatusCode.UNSET
    assert not span.events


def test_failed_attempt_records_the_exception_with_status_error() -> None:
    error = ValueError("card declined")
    span = run_attempt(Recorder(), claimed_job(), "failed", "ValueError: card declined", error)
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "ValueError: card declined"
    (event,) = span.events
    assert event.name == "exception"
    assert (event.attributes or {})["exception.type"] == "ValueError"


def test_released_attempt_is_not_an_error() -> None:
    span = run_attempt(Recorder(), claimed_job(), "released")
    assert span.status.status_code is StatusCode.UNSET
    assert (span.attributes or {})["jobqueue.job.outcome"] == "released"


def test_job_without_traceparent_starts_a_trace_of_its_own() -> None:
    recorder = Recorder()
    outer = recorder.provider.get_tracer("test").start_span("unrelated")
    with trace.use_span(outer, end_on_exit=True):
        span = run_attempt(recorder, claimed_job(traceparent=None))
    assert span.parent is None
    assert span.context is not None
    assert span.context.trace_id != TRACE_ID


def test_malformed_traceparent_starts_a_new_trace() -> None:
    span = run_attempt(Recorder(), claimed_job(traceparent="00-not-a-trace"))
    assert span.parent is None


def test_attempt_begins_with_its_claim_as_first_child() -> None:
    recorder = Recorder()
    started = time.time_ns()
    attempt = recorder.spans.start(claimed_job(), started, started + 5_000_000)
    attempt.end("completed", None)
    (claim,) = recorder.finished("job.claim")
    (span,) = recorder.finished("job.attempt")
    assert span.start_time == claim.start_time == started
    assert claim.end_time == started + 5_000_000
    assert claim.parent is not None
    assert span.context is not None
    assert claim.parent.span_id == span.context.span_id


def test_activated_attempt_is_the_parent_of_spans_made_inside_it() -> None:
    recorder = Recorder()
    attempt = recorder.spans.start(claimed_job(), time.time_ns(), time.time_ns())
    handler = recorder.provider.get_tracer("handler")
    with attempt.activate(), handler.start_as_current_span("inside"):
        pass
    attempt.end("completed", None)
    (inside,) = recorder.finished("inside")
    (span,) = recorder.finished("job.attempt")
    assert inside.parent is not None
    assert span.context is not None
    assert inside.parent.span_id == span.context.span_id


def test_leaving_the_activation_does_not_end_the_span() -> None:
    recorder = Recorder()
    attempt = recorder.spans.start(claimed_job(), time.time_ns(), time.time_ns())
    with attempt.activate():
        pass
    assert not recorder.finished("job.attempt")
    attempt.end("completed", None)
    assert recorder.finished("job.attempt")


def test_not_sampled_submission_is_not_recorded() -> None:
    recorder = Recorder()
    run_claimed = claimed_job(traceparent=TRACEPARENT[:-2] + "00")
    attempt = recorder.spans.start(run_claimed, time.time_ns(), time.time_ns())
    attempt.end("completed", None)
    assert not recorder.exporter.get_finished_spans()


def test_queue_wait_is_claim_time_minus_run_at_and_never_negative() -> None:
    assert queue_wait_ms(claimed_job(waited=timedelta(seconds=2))) == 2000.0
    assert queue_wait_ms(claimed_job(waited=timedelta(seconds=-1))) == 0.0
