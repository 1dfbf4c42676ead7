"""What `start_tracing` builds from a configuration, and the stored trace context."""

from __future__ import annotations

import io
import json

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from jobqueue.adapters.telemetry.trace_context import (
    context_from_traceparent,
    current_traceparent,
)
from jobqueue.adapters.telemetry.tracing import start_tracing
from jobqueue.adapters.telemetry.tracing_config import TracingConfig
from tests.support.otlp_receiver import otlp_receiver

TRACE_ID = 0x0AF7651916CD43DD8448EB211C80319C
PARENT_ID = 0xB7AD6B7169203331
SAMPLED = f"00-{TRACE_ID:032x}-{PARENT_ID:016x}-01"
NOT_SAMPLED = f"00-{TRACE_ID:032x}-{PARENT_ID:016x}-00"


def config(**environ: str) -> TracingConfig:
    return TracingConfig.from_env(environ)


def provider_of(**environ: str) -> TracerProvider:
    provider = start_tracing(config(**environ), console=io.StringIO()).provider
    assert provider is not None
    return provider


def test_off_installs_no_provider() -> None:
    tracing = start_tracing(config(OTEL_TRACES_EXPORTER="none"))
    assert tracing.provider is None
    assert not tracing.enabled
    tracing.shutdown()  # nothing to flush, and no error


def test_off_leaves_the_global_provider_alone() -> None:
    before = trace.get_tracer_provider()
    start_tracing(config()).make_global()
    assert trace.get_tracer_provider() is before


def test_console_exporter_writes_each_span_as_json() -> None:
    out = io.StringIO()
    tracing = start_tracing(config(OTEL_TRACES_EXPORTER="console"), console=out)
    assert tracing.provider is not None
    with tracing.provider.get_tracer("test").start_as_current_span("visible"):
        pass
    tracing.shutdown()
    span = json.loads(out.getvalue())
    assert span["name"] == "visible"


def test_otlp_exporter_sends_spans_over_http_protobuf() -> None:
    with otlp_receiver() as receiver:
        tracing = start_tracing(
            config(
                OTEL_TRACES_EXPORTER="otlp",
                OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
                OTEL_SERVICE_NAME="exported",
            )
        )
        assert tracing.provider is not None
        with tracing.provider.get_tracer("test").start_as_current_span("shipped"):
            pass
        tracing.shutdown()  # flushes the batch
        (span,) = receiver.wait_for(lambda spans: len(spans) == 1)
    assert span.name == "shipped"
    assert span.resource["service.name"] == "exported"


def test_service_name_defaults_to_jobqueue() -> None:
    resource = provider_of(OTEL_TRACES_EXPORTER="console").resource
    assert resource.attributes["service.name"] == "jobqueue"
    assert resource.attributes["telemetry.sdk.language"] == "python"


def test_resource_attributes_are_honoured_and_service_name_wins_over_them() -> None:
    resource = provider_of(
        OTEL_TRACES_EXPORTER="console",
        OTEL_SERVICE_NAME="billing",
        OTEL_RESOURCE_ATTRIBUTES="service.name=ignored,deployment.environment=staging",
    ).resource
    assert resource.attributes["service.name"] == "billing"
    assert resource.attributes["deployment.environment"] == "staging"


def test_service_name_may_come_from_resource_attributes() -> None:
    resource = provider_of(
        OTEL_TRACES_EXPORTER="console", OTEL_RESOURCE_ATTRIBUTES="service.name=from-resource"
    ).resource
    assert resource.attributes["service.name"] == "from-resource"


def sampled(provider: TracerProvider, parent: str | None = None) -> bool:
    span = provider.get_tracer("test").start_span("probe", context=context_from_traceparent(parent))
    span.end()
    return bool(span.get_span_context().trace_flags.sampled)


def test_always_off_samples_nothing() -> None:
    provider = provider_of(OTEL_TRACES_EXPORTER="console", OTEL_TRACES_SAMPLER="always_off")
    assert not sampled(provider)
    assert not sampled(provider, SAMPLED)


def test_ratio_zero_samples_no_root_but_follows_a_sampled_parent() -> None:
    provider = provider_of(
        OTEL_TRACES_EXPORTER="console",
        OTEL_TRACES_SAMPLER="parentbased_traceidratio",
        OTEL_TRACES_SAMPLER_ARG="0",
    )
    assert not any(sampled(provider) for _ in range(20))
    assert sampled(provider, SAMPLED)
    assert not sampled(provider, NOT_SAMPLED)


def test_plain_ratio_sampler_ignores_the_parent() -> None:
    provider = provider_of(
        OTEL_TRACES_EXPORTER="console",
        OTEL_TRACES_SAMPLER="traceidratio",
        OTEL_TRACES_SAMPLER_ARG="0",
    )
    assert not sampled(provider, SAMPLED)
    assert "0" in provider.sampler.get_description()


def test_default_sampler_samples_roots_and_follows_parents() -> None:
    provider = provider_of(OTEL_TRACES_EXPORTER="console")
    assert sampled(provider)
    assert not sampled(provider, NOT_SAMPLED)


# --- the trace context stored with a job ----------------------------------------------


def test_no_traceparent_outside_a_span() -> None:
    assert current_traceparent() is None


def test_traceparent_names_the_current_span() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("test").start_as_current_span("submit") as span:
        traceparent = current_traceparent()
    context = span.get_span_context()
    assert (
        traceparent
        == f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
    )
    assert context.trace_flags.sampled


def test_traceparent_round_trips_into_a_parent_context() -> None:
    parent = trace.get_current_span(context_from_traceparent(SAMPLED)).get_span_context()
    assert (parent.trace_id, parent.span_id, parent.is_remote) == (TRACE_ID, PARENT_ID, True)


@pytest.mark.parametrize("stored", [None, "", "garbage", "00-" + "0" * 32 + "-" + "0" * 16 + "-01"])
def test_missing_or_malformed_traceparent_gives_an_empty_context(stored: str | None) -> None:
    outer = NonRecordingSpan(SpanContext(TRACE_ID, PARENT_ID, is_remote=False))
    with trace.use_span(outer):
        # Never the caller's current span: an attempt must not nest under whatever
        # happens to be current where the pool runs.
        context = context_from_traceparent(stored)
    assert not trace.get_current_span(context).get_span_context().is_valid


def test_traceparent_keeps_the_not_sampled_flag() -> None:
    parent = trace.get_current_span(context_from_traceparent(NOT_SAMPLED)).get_span_context()
    assert parent.trace_flags == TraceFlags.DEFAULT
