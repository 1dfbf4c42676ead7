"""One trace per job, on a real database: the submitting request, then every attempt.

The app, the pool and the engine share a TracerProvider passed explicitly, exporting into
memory, as `jobqueue serve` does with OTEL_TRACES_EXPORTER set.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.domain.errors import Permanent
from jobqueue.domain.registry import JobContext, Registry
from tests.support.api import build_api, eventually

TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736
CALLER_SPAN_ID = 0x00F067AA0BA902B7
TRACEPARENT = f"00-{TRACE_ID:032x}-{CALLER_SPAN_ID:016x}-01"


def handlers() -> Registry:
    registry = Registry()
    failures: dict[str, int] = {}

    @registry.handler("flaky")
    async def flaky(ctx: JobContext, payload: Any) -> None:
        # Fails its first attempt, succeeds on the retry.
        failures[str(ctx.job_id)] = failures.get(str(ctx.job_id), 0) + 1
        if failures[str(ctx.job_id)] == 1:
            raise ConnectionError("upstream reset the connection")

    @registry.handler("hopeless")
    async def hopeless(ctx: JobContext, payload: Any) -> None:
        # Retryable on attempt 1, refused for good on attempt 2.
        if ctx.attempt == 1:
            raise ConnectionError("upstream is down")
        raise Permanent("upstream says the account is closed")

    return registry


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
async def client(
    engine: AsyncEngine, database_url: str, exporter: InMemorySpanExporter
) -> AsyncIterator[AsyncTestClient[Any]]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    api = build_api(database_url, handlers=handlers(), with_pool=True, tracer_provider=provider)
    async with AsyncTestClient(app=api.app) as client:
        yield client


def ids(span: ReadableSpan) -> tuple[int, int]:
    assert span.context is not None
    return span.context.trace_id, span.context.span_id


def number(span: ReadableSpan, attribute: str) -> float:
    value = (span.attributes or {})[attribute]
    assert isinstance(value, int | float)
    return value


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def attempts_of(exporter: InMemorySpanExporter, job_id: str) -> list[ReadableSpan]:
    spans = [
        span
        for span in exporter.get_finished_spans()
        if span.name == "job.attempt" and (span.attributes or {}).get("jobqueue.job.id") == job_id
    ]
    return sorted(spans, key=lambda span: number(span, "jobqueue.job.attempt"))


async def submit(client: AsyncTestClient[Any], job_type: str, max_attempts: int) -> str:
    response = await client.post(
        "/jobs",
        json={"type": job_type, "max_attempts": max_attempts},
        headers={"traceparent": TRACEPARENT},
    )
    assert response.status_code == 201, response.text
    job_id: str = response.json()["id"]
    return job_id


async def finished_attempts(
    exporter: InMemorySpanExporter, job_id: str, count: int
) -> list[ReadableSpan]:
    async def probe() -> list[ReadableSpan]:
        return attempts_of(exporter, job_id)

    return await eventually(probe, lambda spans: len(spans) == count)


def submission_span(exporter: InMemorySpanExporter) -> ReadableSpan:
    (span,) = [
        s
        for s in exporter.get_finished_spans()
        if s.kind is SpanKind.SERVER and s.name == "POST /jobs"
    ]
    return span


async def test_request_and_retried_attempts_are_one_trace(
    client: AsyncTestClient[Any], exporter: InMemorySpanExporter
) -> None:
    job_id = await submit(client, "flaky", max_attempts=3)
    first, second = await finished_attempts(exporter, job_id, 2)
    request = submission_span(exporter)

    trace_id, request_id = ids(request)
    assert trace_id == TRACE_ID
    assert parent_id(request) == CALLER_SPAN_ID
    for attempt in (first, second):
        assert ids(attempt)[0] == TRACE_ID
        assert parent_id(attempt) == request_id
        assert attempt.kind is SpanKind.CONSUMER
    assert ids(first)[1] != ids(second)[1]

    assert (first.attributes or {})["jobqueue.job.outcome"] == "retried"
    assert first.status.status_code is StatusCode.ERROR
    assert [event.name for event in first.events] == ["exception"]
    assert (second.attributes or {})["jobqueue.job.outcome"] == "completed"
    assert second.status.status_code is StatusCode.UNSET
    for attempt in (first, second):
        attributes = attempt.attributes or {}
        assert attributes["jobqueue.job.type"] == "flaky"
        assert attributes["jobqueue.job.max_attempts"] == 3
        assert number(attempt, "jobqueue.job.queue_wait_ms") >= 0


async def test_final_failure_is_the_last_attempt_of_the_same_trace(
    client: AsyncTestClient[Any], exporter: InMemorySpanExporter
) -> None:
    job_id = await submit(client, "hopeless", max_attempts=5)
    first, last = await finished_attempts(exporter, job_id, 2)
    _, request_id = ids(submission_span(exporter))

    assert {ids(first)[0], ids(last)[0]} == {TRACE_ID}
    assert {parent_id(first), parent_id(last)} == {request_id}
    assert (first.attributes or {})["jobqueue.job.outcome"] == "retried"
    assert (last.attributes or {})["jobqueue.job.outcome"] == "failed"
    assert last.status.status_code is StatusCode.ERROR
    assert "account is closed" in (last.status.description or "")
    (event,) = last.events
    assert (event.attributes or {})["exception.type"] == "jobqueue.domain.errors.Permanent"


async def test_statements_are_spans_of_the_request_and_the_attempt_that_ran_them(
    client: AsyncTestClient[Any], exporter: InMemorySpanExporter
) -> None:
    job_id = await submit(client, "flaky", max_attempts=3)
    attempts = await finished_attempts(exporter, job_id, 2)
    _, request_id = ids(submission_span(exporter))

    statements = [s for s in exporter.get_finished_spans() if s.kind is SpanKind.CLIENT]
    by_parent: dict[int | None, list[str]] = {}
    for statement in statements:
        by_parent.setdefault(parent_id(statement), []).append(statement.name.split()[0])
    assert "INSERT" in by_parent[request_id]
    for attempt in attempts:
        # The outcome write (retry, then complete): a statement of its own, or carried by
        # the next claim (`WITH ended AS (UPDATE …) … claimed AS (UPDATE …)`).
        assert {"UPDATE", "WITH"} & set(by_parent[ids(attempt)[1]])
    # The pool's polling claims ran outside any trace and made no root spans of their own;
    # each claim that returned the job is its attempt's `job.claim` span instead.
    assert None not in by_parent
    claims = [s for s in exporter.get_finished_spans() if s.name == "job.claim"]
    assert {parent_id(claim) for claim in claims} >= {ids(a)[1] for a in attempts}


async def test_job_submitted_without_traceparent_gets_the_requests_new_trace(
    client: AsyncTestClient[Any], exporter: InMemorySpanExporter
) -> None:
    response = await client.post("/jobs", json={"type": "flaky", "max_attempts": 3})
    assert response.status_code == 201
    job_id = response.json()["id"]
    attempts = await finished_attempts(exporter, job_id, 2)
    request = submission_span(exporter)

    assert request.parent is None
    assert {ids(attempt)[0] for attempt in attempts} == {ids(request)[0]}
    assert ids(request)[0] != TRACE_ID


async def test_the_request_span_says_which_job_it_made_or_found_or_cancelled(
    client: AsyncTestClient[Any], exporter: InMemorySpanExporter
) -> None:
    body = {"type": "flaky", "delay": "1h", "unique": {"key": "traced"}}
    created = (await client.post("/jobs", json=body)).json()
    await client.post("/jobs", json=body)
    await client.post(f"/jobs/{created['id']}/cancel")

    servers = [
        dict(span.attributes or {})
        for span in exporter.get_finished_spans()
        if span.kind is SpanKind.SERVER
    ]
    submitted = [a for a in servers if "jobqueue.duplicate" in a]
    assert [(a["jobqueue.job.id"], a["jobqueue.duplicate"]) for a in submitted] == [
        (created["id"], False),
        (created["id"], True),
    ]
    (cancel,) = [a for a in servers if a.get("jobqueue.cancelled")]
    assert cancel["jobqueue.job.id"] == created["id"]
