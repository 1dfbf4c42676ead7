"""`jobqueue serve` exporting over OTLP/HTTP: one trace from submission to attempt."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from tests.support.otlp_receiver import ReceivedSpan, otlp_receiver
from tests.support.processes import free_port, run, start

pytestmark = pytest.mark.slow

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
SERVER = 2  # opentelemetry.proto.trace.v1.Span.SpanKind.SPAN_KIND_SERVER
CONSUMER = 5
DEADLINE = 60.0


def wait_until_completed(base: str, job_id: str) -> None:
    deadline = time.monotonic() + DEADLINE
    status = None
    while time.monotonic() < deadline:
        status = httpx.get(f"{base}/jobs/{job_id}/status", timeout=5).json()["status"]
        if status == "completed":
            return
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not complete within {DEADLINE}s: {status}")


def has_attempt_and_submission(spans: list[ReceivedSpan]) -> bool:
    kinds = {(span.kind, span.name.split(" ")[0]) for span in spans}
    return (CONSUMER, "job.attempt") in kinds and (SERVER, "POST") in kinds


@pytest.mark.usefixtures("engine")
def test_serve_exports_submission_and_attempt_in_one_trace(
    database_url: str, tmp_path: Path
) -> None:
    with otlp_receiver() as receiver:
        service = start(
            ["serve"],
            free_port(),
            tmp_path,
            DATABASE_URL=database_url,
            WORKERS="2",
            POLL_INTERVAL="200ms",
            OTEL_TRACES_EXPORTER="otlp",
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
            OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
            OTEL_BSP_SCHEDULE_DELAY="100",
            OTEL_SERVICE_NAME="jobqueue-under-test",
        )
        try:
            service.wait_until_healthy()
            response = httpx.post(
                f"{service.base_url}/jobs",
                json={"type": "sleep", "payload": {"duration": "0s"}},
                headers={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"},
                timeout=10,
            )
            assert response.status_code == 201, response.text
            job_id = response.json()["id"]
            wait_until_completed(service.base_url, job_id)
            spans = receiver.wait_for(has_attempt_and_submission, timeout=DEADLINE)
        finally:
            service.stop()

    (submission,) = [s for s in spans if s.kind == SERVER and s.name.startswith("POST")]
    (attempt,) = [s for s in spans if s.name == "job.attempt"]
    assert submission.trace_id == attempt.trace_id == TRACE_ID
    assert submission.parent_span_id == PARENT_ID
    assert attempt.parent_span_id == submission.span_id
    assert attempt.attributes["jobqueue.job.id"] == job_id
    assert attempt.attributes["jobqueue.job.outcome"] == "completed"
    assert attempt.resource["service.name"] == "jobqueue-under-test"
    # The access log line and the attempt's lines carry the trace they belong to.
    log = service.log()
    (access,) = [
        line
        for line in log
        if line["logger"] == "jobqueue.access"
        and line.get("path") == "/jobs"
        and line.get("method") == "POST"
    ]
    assert (access["trace_id"], access["span_id"]) == (TRACE_ID, submission.span_id)
    finished = [line for line in log if line["message"] == "job finished"]
    assert [(line["trace_id"], line["span_id"]) for line in finished] == [
        (TRACE_ID, attempt.span_id)
    ]


def test_grpc_protocol_stops_serve_at_start_naming_the_variable() -> None:
    result = run(
        ["serve"],
        timeout=60,
        OTEL_TRACES_EXPORTER="otlp",
        OTEL_EXPORTER_OTLP_PROTOCOL="grpc",
    )
    assert result.returncode == 2
    assert "OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc'" in result.stderr
