"""Server spans around a Litestar application: `entrypoints.http.tracing.traced`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from litestar import Litestar, get, post
from litestar.params import FromPath
from litestar.testing import TestClient
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from jobqueue.adapters.telemetry.trace_context import current_traceparent
from jobqueue.entrypoints.http.tracing import traced

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_ID = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"


@get("/things/{thing_id:str}", sync_to_thread=False)
def read_thing(thing_id: FromPath[str]) -> dict[str, str | None]:
    return {"id": thing_id, "traceparent": current_traceparent()}


@post("/things", sync_to_thread=False)
def make_thing() -> dict[str, str]:
    raise RuntimeError("storage on fire")


@get("/healthz", sync_to_thread=False)
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def client(exporter: InMemorySpanExporter) -> Iterator[TestClient[Litestar]]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = Litestar(route_handlers=[read_thing, make_thing, healthz])
    app.asgi_handler = traced(app.asgi_handler, provider)
    with TestClient(app=app) as test_client:
        yield test_client


def server_span(exporter: InMemorySpanExporter) -> ReadableSpan:
    (span,) = [s for s in exporter.get_finished_spans() if s.kind is SpanKind.SERVER]
    return span


def test_request_with_traceparent_is_a_server_span_in_that_trace(
    client: TestClient[Litestar], exporter: InMemorySpanExporter
) -> None:
    response = client.get("/things/42", headers={"traceparent": TRACEPARENT})
    assert response.status_code == 200
    span = server_span(exporter)
    assert span.context is not None
    assert f"{span.context.trace_id:032x}" == TRACE_ID
    assert span.parent is not None
    assert f"{span.parent.span_id:016x}" == PARENT_ID


def test_handler_sees_the_server_span_as_current(
    client: TestClient[Litestar], exporter: InMemorySpanExporter
) -> None:
    seen = client.get("/things/42", headers={"traceparent": TRACEPARENT}).json()["traceparent"]
    span = server_span(exporter)
    assert span.context is not None
    assert seen.startswith(f"00-{TRACE_ID}-{span.context.span_id:016x}-")


def test_request_without_traceparent_starts_a_trace(
    client: TestClient[Litestar], exporter: InMemorySpanExporter
) -> None:
    client.get("/things/42")
    span = server_span(exporter)
    assert span.parent is None


def test_span_is_named_by_route_not_by_path(
    client: TestClient[Litestar], exporter: InMemorySpanExporter
) -> None:
    client.get("/things/42")
    client.get("/things/43")
    names = {span.name for span in exporter.get_finished_spans()}
    routes = {(span.attributes or {}).get("http.route") for span in exporter.get_finished_spans()}
    assert len(names) == 1
    (name,) = names
    assert name == "GET /things/{thing_id}"
    assert routes == {name.removeprefix("GET ")}


def test_unmatched_path_is_named_by_method_only(
    client: TestClient[Litestar], exporter: InMemorySpanExporter
) -> None:
    assert client.get("/nowhere/7").status_code == 404
    assert server_span(exporter).name == "GET"


def test_server_error_sets_error_status(
    client: TestClient[Litestar], exporter: InMemorySpanExporter
) -> None:
    assert client.post("/things").status_code == 500
    span = server_span(exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {}).get("http.route") == "/things"


def test_probes_are_not_traced(
    client: TestClient[Litestar], exporter: InMemorySpanExporter
) -> None:
    assert client.get("/healthz").status_code == 200
    assert not exporter.get_finished_spans()


def test_only_the_server_span_is_recorded(
    client: TestClient[Litestar], exporter: InMemorySpanExporter
) -> None:
    client.get("/things/42")
    assert len(exporter.get_finished_spans()) == 1
