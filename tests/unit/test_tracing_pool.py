"""The worker pool traced: every attempt a `job.attempt` span in the submission's trace."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from jobqueue.adapters.telemetry.job_spans import JobSpans
from jobqueue.adapters.telemetry.logging import TraceContextFilter
from jobqueue.domain.errors import Permanent
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.status import Status
from jobqueue.entrypoints.worker.pool import WorkerPool
from jobqueue.entrypoints.worker.pool_config import PoolConfig
from tests.fakes import DataclassDecoder, InMemoryJobStore, wall_clock
from tests.support.logs import captured_json_log
from tests.unit.pool_harness import FAST, config, eventually, running, settled

TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736
SUBMISSION_ID = 0x00F067AA0BA902B7
TRACEPARENT = f"00-{TRACE_ID:032x}-{SUBMISSION_ID:016x}-01"


class Traced:
    """A pool over an in-memory store whose attempts are traced into memory."""

    def __init__(self, registry: Registry, pool_config: PoolConfig = FAST) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.store = InMemoryJobStore(wall_clock)
        self.pool = WorkerPool(
            self.store, registry, DataclassDecoder(), pool_config, tracer=JobSpans(self.provider)
        )

    async def submit(self, job_type: str, max_attempts: int = 3) -> Job:
        new = NewJob(type=job_type, max_attempts=max_attempts, traceparent=TRACEPARENT)
        return (await self.store.submit(new)).job

    def attempts(self) -> list[ReadableSpan]:
        spans = [s for s in self.exporter.get_finished_spans() if s.name == "job.attempt"]
        return sorted(spans, key=lambda span: attribute(span, "jobqueue.job.attempt"))

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if s.name == name]


def attribute(span: ReadableSpan, name: str) -> Any:
    return (span.attributes or {})[name]


def trace_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.trace_id)


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


async def test_retried_job_is_one_trace_with_a_span_per_attempt() -> None:
    registry = Registry()
    calls = 0

    @registry.handler("flaky")
    async def flaky(ctx: JobContext, payload: Any) -> None:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise ConnectionError(f"try {calls} failed")

    traced = Traced(registry)
    job = await traced.submit("flaky", max_attempts=3)
    async with running(traced.pool):
        await settled(traced.store, job)
        await eventually(lambda: len(traced.attempts()) == 3, "three attempt spans ended")

    spans = traced.attempts()
    assert {trace_id(span) for span in spans} == {TRACE_ID}
    assert {parent_id(span) for span in spans} == {SUBMISSION_ID}
    assert len({span_id(span) for span in spans}) == 3
    assert [attribute(span, "jobqueue.job.outcome") for span in spans] == [
        "retried",
        "retried",
        "completed",
    ]
    assert [attribute(span, "jobqueue.job.attempt") for span in spans] == [1, 2, 3]
    assert {attribute(span, "jobqueue.job.id") for span in spans} == {str(job.id)}
    assert {span.kind for span in spans} == {SpanKind.CONSUMER}
    first, second, last = spans
    for failed in (first, second):
        assert failed.status.status_code is StatusCode.ERROR
        assert "ConnectionError: try" in (failed.status.description or "")
        (event,) = failed.events
        assert (event.attributes or {})["exception.type"] == "ConnectionError"
    assert last.status.status_code is StatusCode.UNSET


async def test_exhausted_job_ends_with_a_dead_letter_span() -> None:
    registry = Registry()

    @registry.handler("doomed")
    async def doomed(ctx: JobContext, payload: Any) -> None:
        raise TimeoutError("upstream never answers")

    traced = Traced(registry)
    job = await traced.submit("doomed", max_attempts=2)
    async with running(traced.pool):
        await settled(traced.store, job)
        await eventually(lambda: len(traced.attempts()) == 2, "two attempt spans ended")

    outcomes = [attribute(span, "jobqueue.job.outcome") for span in traced.attempts()]
    assert outcomes == ["retried", "dead_letter"]
    assert {span.status.status_code for span in traced.attempts()} == {StatusCode.ERROR}


async def test_permanent_failure_is_a_failed_span_with_its_exception() -> None:
    registry = Registry()

    @registry.handler("refused")
    async def refused(ctx: JobContext, payload: Any) -> None:
        raise Permanent("card declined")

    traced = Traced(registry)
    job = await traced.submit("refused")
    async with running(traced.pool):
        assert (await settled(traced.store, job)).status is Status.FAILED
        await eventually(lambda: len(traced.attempts()) == 1, "the attempt span ended")

    (span,) = traced.attempts()
    assert attribute(span, "jobqueue.job.outcome") == "failed"
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "Permanent: card declined"
    (event,) = span.events
    assert (event.attributes or {})["exception.message"] == "card declined"


async def test_handler_spans_are_children_of_the_attempt() -> None:
    registry = Registry()
    traced: Traced

    @registry.handler("async_work")
    async def async_work(ctx: JobContext, payload: Any) -> None:
        with traced.provider.get_tracer("handler").start_as_current_span("async step"):
            await asyncio.sleep(0)

    @registry.handler("sync_work")
    def sync_work(ctx: JobContext, payload: Any) -> None:
        # Runs in a thread of the pool's: the span must have followed the attempt there.
        with traced.provider.get_tracer("handler").start_as_current_span("sync step"):
            pass

    traced = Traced(registry)
    jobs = [await traced.submit("async_work"), await traced.submit("sync_work")]
    async with running(traced.pool):
        for job in jobs:
            await settled(traced.store, job)
        await eventually(lambda: len(traced.attempts()) == 2, "both attempt spans ended")

    by_type = {attribute(span, "jobqueue.job.type"): span for span in traced.attempts()}
    (async_step,) = traced.named("async step")
    (sync_step,) = traced.named("sync step")
    assert parent_id(async_step) == span_id(by_type["async_work"])
    assert parent_id(sync_step) == span_id(by_type["sync_work"])
    assert trace_id(sync_step) == TRACE_ID


async def test_attempt_starts_with_its_claim() -> None:
    registry = Registry()

    @registry.handler("noop")
    async def noop(ctx: JobContext, payload: Any) -> None:
        pass

    traced = Traced(registry)
    job = await traced.submit("noop")
    async with running(traced.pool):
        await settled(traced.store, job)
        await eventually(lambda: len(traced.attempts()) == 1, "the attempt span ended")

    (attempt,) = traced.attempts()
    (claim,) = traced.named("job.claim")
    assert parent_id(claim) == span_id(attempt)
    assert claim.start_time == attempt.start_time


async def test_shutdown_release_is_a_released_span_without_error() -> None:
    registry = Registry()
    began = asyncio.Event()

    @registry.handler("long")
    async def long(ctx: JobContext, payload: Any) -> None:
        began.set()
        await asyncio.sleep(3600)

    traced = Traced(registry, config(shutdown_timeout=timedelta(0)))
    job = await traced.submit("long")
    async with running(traced.pool):
        await asyncio.wait_for(began.wait(), 20)
    assert (await traced.store.get(job.id)).status is Status.PENDING

    (span,) = traced.attempts()
    assert attribute(span, "jobqueue.job.outcome") == "released"
    assert span.status.status_code is StatusCode.UNSET
    assert not span.events


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    with captured_json_log(filters=(TraceContextFilter(),)) as captured:
        yield captured.stream


async def test_attempt_log_lines_carry_its_trace_and_span_ids(json_log: io.StringIO) -> None:
    registry = Registry()

    @registry.handler("chatty")
    async def chatty(ctx: JobContext, payload: Any) -> None:
        ctx.logger.info("working on it")

    traced = Traced(registry)
    job = await traced.submit("chatty")
    async with running(traced.pool):
        await settled(traced.store, job)
        await eventually(lambda: len(traced.attempts()) == 1, "the attempt span ended")
    (span,) = traced.attempts()

    lines = [json.loads(line) for line in json_log.getvalue().splitlines()]
    of_job = [line for line in lines if line.get("job_id") == str(job.id)]
    assert [line["message"] for line in of_job] == ["job started", "working on it", "job finished"]
    for line in of_job:
        assert (line["trace_id"], line["span_id"]) == (f"{TRACE_ID:032x}", f"{span_id(span):016x}")


async def test_pool_without_tracer_starts_no_span() -> None:
    registry = Registry()
    seen: list[bool] = []

    @registry.handler("noop")
    async def noop(ctx: JobContext, payload: Any) -> None:
        seen.append(trace.get_current_span().get_span_context().is_valid)

    store = InMemoryJobStore(wall_clock)
    pool = WorkerPool(store, registry, DataclassDecoder(), FAST)
    job = (await store.submit(NewJob(type="noop", max_attempts=1, traceparent=TRACEPARENT))).job
    async with running(pool):
        await settled(store, job)
    assert seen == [False]
