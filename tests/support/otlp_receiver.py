"""A minimal OTLP/HTTP trace receiver on 127.0.0.1, for tests that export real spans.

It accepts `POST /v1/traces` with a protobuf `ExportTraceServiceRequest` (gzip or not),
keeps the spans, and answers as a collector does. Nothing else.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

TRACES_PATH = "/v1/traces"


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits
    parent_span_id: str  # "" for a root span
    kind: int  # opentelemetry.proto.trace.v1.Span.SpanKind
    attributes: dict[str, Any]
    status_code: int  # opentelemetry.proto.trace.v1.Status.StatusCode
    resource: dict[str, Any]


class OtlpReceiver:
    def __init__(self) -> None:
        self._spans: list[ReceivedSpan] = []
        self._lock = threading.Lock()
        self.requests = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True

    @property
    def endpoint(self) -> str:
        """The base URL, as OTEL_EXPORTER_OTLP_ENDPOINT takes it."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self._spans)

    def wait_for(
        self, accept: Callable[[list[ReceivedSpan]], bool], timeout: float = 30.0
    ) -> list[ReceivedSpan]:
        """The spans received so far once `accept` holds for them; fail after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans()
            if accept(spans):
                return spans
            if time.monotonic() > deadline:
                names = sorted({span.name for span in spans})
                raise AssertionError(f"spans not received within {timeout}s; got {names}")
            time.sleep(0.05)

    def _add(self, request: ExportTraceServiceRequest) -> None:
        received: list[ReceivedSpan] = []
        for resource_spans in request.resource_spans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(
                        ReceivedSpan(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            kind=span.kind,
                            attributes=_attributes(span.attributes),
                            status_code=span.status.code,
                            resource=resource,
                        )
                    )
        with self._lock:
            self.requests += 1
            self._spans.extend(received)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                if self.path != TRACES_PATH:
                    self.send_error(404)
                    return
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver._add(request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the test's output is not the place for an access log

        return Handler

    def serve(self) -> threading.Thread:
        thread = threading.Thread(target=self._server.serve_forever, name="otlp receiver")
        thread.daemon = True
        thread.start()
        return thread

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def otlp_receiver() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver()
    thread = receiver.serve()
    try:
        yield receiver
    finally:
        receiver.close()
        thread.join(timeout=10)


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    return getattr(value, kind)
