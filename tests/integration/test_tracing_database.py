"""Database spans for the store's statements: inside a trace only."""

from __future__ import annotations

from datetime import timedelta

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.adapters.telemetry.tracing import trace_engine
from jobqueue.domain.job import NewJob
from tests.fakes import TEST_TYPES


def traced_store(
    engine: AsyncEngine,
) -> tuple[PostgresJobStore, TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace_engine(engine, provider)
    return PostgresJobStore(engine), provider, exporter


async def test_statement_inside_a_trace_is_a_client_span_of_it(engine: AsyncEngine) -> None:
    store, provider, exporter = traced_store(engine)
    with provider.get_tracer("test").start_as_current_span("request") as request:
        await store.submit(NewJob(type="email", max_attempts=3))
    statements = [s for s in exporter.get_finished_spans() if s.kind is SpanKind.CLIENT]
    assert statements, "the INSERT made no span"
    parent_ids = {s.parent.span_id for s in statements if s.parent is not None}
    assert parent_ids == {request.get_span_context().span_id}
    (insert,) = [s for s in statements if s.name.startswith("INSERT")]
    assert (insert.attributes or {}).get("db.system") == "postgresql"


async def test_statements_outside_any_trace_make_no_span(engine: AsyncEngine) -> None:
    store, _, exporter = traced_store(engine)
    await store.submit(NewJob(type="email", max_attempts=3))
    # The pool polls like this every second: a trace per poll would bury everything.
    await store.claim(10, timedelta(minutes=1), types=TEST_TYPES)
    await store.ping()
    assert not exporter.get_finished_spans()


async def test_failing_statement_span_has_error_status(engine: AsyncEngine) -> None:
    _, provider, exporter = traced_store(engine)
    with provider.get_tracer("test").start_as_current_span("request"):
        async with engine.connect() as connection:
            with pytest.raises(DBAPIError):
                await connection.execute(text("SELECT * FROM no_such_table"))
    (failed,) = [s for s in exporter.get_finished_spans() if s.kind is SpanKind.CLIENT]
    assert failed.status.status_code is StatusCode.ERROR
