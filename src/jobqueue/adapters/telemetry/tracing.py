"""OpenTelemetry tracing: the SDK provider built from `TracingConfig`, and database spans.

With tracing off no SDK provider exists at all: callers get `None` and install nothing,
so requests and attempts pay for no span, and `opentelemetry.trace` calls made by
handlers reach the API's no-op tracer.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import TextIO

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SpanExporter,
)
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    ParentBased,
    ParentBasedTraceIdRatio,
    TraceIdRatioBased,
)
from opentelemetry.sdk.trace.sampling import Sampler as SdkSampler
from opentelemetry.trace import Span, SpanKind
from opentelemetry.util.types import Attributes
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.driver import watch
from jobqueue.adapters.telemetry.tracing_config import (
    DEFAULT_SERVICE_NAME,
    Exporter,
    Sampler,
    TracingConfig,
)
from jobqueue.release import package_version

_log = logging.getLogger("jobqueue.tracing")


class Tracing:
    """The process's tracing. `provider` is None when tracing is off."""

    def __init__(self, provider: TracerProvider | None) -> None:
        self.provider = provider

    @property
    def enabled(self) -> bool:
        return self.provider is not None

    def make_global(self) -> None:
        """Install the provider as OpenTelemetry's global one, for code that asks the API
        (`trace.get_tracer`); a no-op with tracing off. Once per process."""
        if self.provider is not None:
            trace.set_tracer_provider(self.provider)

    def shutdown(self) -> None:
        """Export what is still buffered, then stop. Blocks: call it from a thread."""
        if self.provider is None:
            return
        try:
            self.provider.shutdown()
        except Exception:
            # Losing the last spans must not turn a clean stop into a failed one.
            _log.exception("shutting down tracing failed; some spans may be lost")


def start_tracing(config: TracingConfig, *, console: TextIO | None = None) -> Tracing:
    """The tracer provider `config` describes (not installed globally).

    `console` receives the console exporter's spans; stderr by default, because stdout
    carries the JSON log, one object per line, which multi-line span dumps would break.
    """
    if not config.enabled:
        return Tracing(None)
    provider = TracerProvider(resource=resource_of(config), sampler=sampler_of(config))
    for exporter in config.exporters:
        provider.add_span_processor(
            BatchSpanProcessor(
                _exporter(exporter, config, console),
                max_queue_size=config.max_queue_size,
                schedule_delay_millis=config.schedule_delay_ms,
                max_export_batch_size=config.max_export_batch_size,
                export_timeout_millis=config.export_timeout_ms,
            )
        )
    _log.info(
        "tracing on",
        extra={
            "exporters": [exporter.value for exporter in config.exporters],
            "otlp_endpoint": config.otlp_endpoint if Exporter.OTLP in config.exporters else None,
            "sampler": config.sampler.value,
            "service_name": provider.resource.attributes["service.name"],
        },
    )
    return Tracing(provider)


def resource_of(config: TracingConfig) -> Resource:
    """Who emits the spans: OTEL_SERVICE_NAME over OTEL_RESOURCE_ATTRIBUTES over ours."""
    attributes: dict[str, str] = {
        "telemetry.sdk.language": "python",
        "telemetry.sdk.name": "opentelemetry",
        "telemetry.sdk.version": _version_of("opentelemetry-sdk"),
        "service.name": DEFAULT_SERVICE_NAME,
        "service.version": package_version(),
    }
    attributes.update(config.resource_attributes)
    if config.service_name is not None:
        attributes["service.name"] = config.service_name
    return Resource(attributes)


def sampler_of(config: TracingConfig) -> SdkSampler:
    match config.sampler:
        case Sampler.ALWAYS_ON:
            return ALWAYS_ON
        case Sampler.ALWAYS_OFF:
            return ALWAYS_OFF
        case Sampler.TRACE_ID_RATIO:
            return TraceIdRatioBased(config.sampler_ratio)
        case Sampler.PARENT_BASED_ALWAYS_ON:
            return ParentBased(ALWAYS_ON)
        case Sampler.PARENT_BASED_ALWAYS_OFF:
            return ParentBased(ALWAYS_OFF)
        case Sampler.PARENT_BASED_TRACE_ID_RATIO:
            return ParentBasedTraceIdRatio(config.sampler_ratio)


def _exporter(exporter: Exporter, config: TracingConfig, console: TextIO | None) -> SpanExporter:
    match exporter:
        case Exporter.OTLP:
            # Imported here: with protobuf and requests it takes a quarter of a second,
            # which a process not exporting over OTLP need not spend at every start.
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                OTLPSpanExporter,
            )

            # Headers, timeout, compression and certificates come from their standard
            # OTEL_EXPORTER_OTLP_* variables, which the exporter reads itself.
            return OTLPSpanExporter(endpoint=config.otlp_endpoint)
        case Exporter.CONSOLE:
            return ConsoleSpanExporter(out=console if console is not None else sys.stderr)


def _version_of(distribution: str) -> str:
    try:
        return version(distribution)
    except PackageNotFoundError:  # pragma: no cover - the SDK is a dependency
        return "unknown"


# --- database spans ------------------------------------------------------------------------


def trace_engine(engine: AsyncEngine, provider: trace.TracerProvider) -> None:
    """Give every statement `engine` runs inside a trace a client span, so a slow insert
    or outcome write shows up in the request or attempt that waited for it.

    Statements outside any trace (the pool's polling claims, lease recovery, the queue
    depth gauge, readiness probes) get no span: each would otherwise start a trace of
    its own, one per poll, burying the traces that matter. A claim that returned jobs
    shows up in each job's trace all the same, as the `job.claim` span (`job_spans`).
    """
    # Imported here: the instrumentation package is only needed with tracing on.
    from opentelemetry.instrumentation.sqlalchemy.engine import EngineTracer
    from opentelemetry.instrumentation.sqlalchemy.version import __version__

    # `EngineTracer` rather than `SQLAlchemyInstrumentor().instrument(engine=...)`: the
    # instrumentor is a process-wide singleton that also patches `create_engine` for every
    # engine created afterwards, and instruments only once per process, which would
    # tie all engines to the first provider.
    tracer = _InTraceOnly(
        provider.get_tracer("opentelemetry.instrumentation.sqlalchemy", __version__)
    )
    connections = (
        NoOpMeterProvider().get_meter("jobqueue").create_up_down_counter("db.client.connections")
    )
    EngineTracer(tracer, engine.sync_engine, connections)  # type: ignore[no-untyped-call]
    # The worker's hot-path statements bypass SQLAlchemy's events; named and described
    # here as the instrumentation names the others.
    watch(engine, _DriverSpans(tracer, engine.url.database))


class _DriverSpans:
    """Client spans for the statements sent on the driver (`adapters.postgres.driver`)."""

    def __init__(self, tracer: trace.Tracer, database: str | None) -> None:
        self._tracer = tracer
        self._database = database

    def sending(self, sql: str, arguments: Sequence[object]) -> AbstractContextManager[object]:
        verb = sql.split(None, 1)[0] if sql.strip() else "SQL"
        # A claim's statement starts with its CTE; what it does is the UPDATE.
        if verb == "WITH" and "UPDATE" in sql:
            verb = "UPDATE"
        name = f"{verb} {self._database}" if self._database else verb
        attributes: dict[str, str] = {"db.system": "postgresql", "db.statement": sql}
        if self._database:
            attributes["db.name"] = self._database
        return self._tracer.start_as_current_span(name, kind=SpanKind.CLIENT, attributes=attributes)


class _InTraceOnly(trace.Tracer):
    """Starts spans only under a valid parent; elsewhere hands out the invalid span."""

    def __init__(self, inner: trace.Tracer) -> None:
        self._inner = inner

    def start_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[trace.Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> Span:
        if not trace.get_current_span(context).get_span_context().is_valid:
            return trace.INVALID_SPAN
        return self._inner.start_span(
            name,
            context,
            kind,
            attributes,
            links,
            start_time,
            record_exception,
            set_status_on_exception,
        )

    @contextmanager
    def start_as_current_span(  # type: ignore[override]
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[trace.Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> Iterator[Span]:
        span = self.start_span(
            name,
            context,
            kind,
            attributes,
            links,
            start_time,
            record_exception,
            set_status_on_exception,
        )
        with trace.use_span(
            span,
            end_on_exit=end_on_exit,
            record_exception=record_exception,
            set_status_on_exception=set_status_on_exception,
        ) as current:
            yield current
