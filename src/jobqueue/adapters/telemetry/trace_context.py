"""The W3C `traceparent` stored with a job: how a submission's trace reaches its attempts.

Only the OpenTelemetry API is needed here, never the SDK: with tracing off no span is
current, nothing is stored, and the attempts start no trace.
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

# The W3C Trace Context format, and only it: the column holds a `traceparent` header,
# whatever propagators the process has configured for HTTP.
_TRACE_CONTEXT = TraceContextTextMapPropagator()
_TRACEPARENT = "traceparent"


def current_traceparent() -> str | None:
    """The `traceparent` of the span current here, or None outside any valid span.

    Store it with a job (`NewJob.traceparent`) so that its attempts join this trace.
    """
    carrier: dict[str, str] = {}
    _TRACE_CONTEXT.inject(carrier)
    return carrier.get(_TRACEPARENT)


def context_from_traceparent(traceparent: str | None) -> Context:
    """A context whose parent is the span `traceparent` names; empty (a new trace) when it
    is missing or malformed, never the caller's current context."""
    if not traceparent:
        return Context()
    return _TRACE_CONTEXT.extract({_TRACEPARENT: traceparent}, context=Context())


def trace_id(traceparent: str | None) -> str | None:
    """The trace id `traceparent` names (32 lowercase hex digits, as tracing UIs search
    for it), or None when it is missing or malformed."""
    span = trace.get_current_span(context_from_traceparent(traceparent)).get_span_context()
    return trace.format_trace_id(span.trace_id) if span.is_valid else None


def annotate_current_span(attributes: Mapping[str, str | bool | int]) -> None:
    """Set `jobqueue.<name>` attributes on the span current here (the request's), so a
    trace says what the request did to which job: a no-op outside any recording span."""
    span = trace.get_current_span()
    if span.is_recording():
        for name, value in attributes.items():
            span.set_attribute(f"jobqueue.{name}", value)
