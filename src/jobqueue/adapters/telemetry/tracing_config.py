"""Tracing configuration from the standard OpenTelemetry environment variables.

Read from a mapping handed in (the process environment at the entrypoint), never from
`os.environ` here, so tests describe a configuration without touching the process. A bad
value is refused with the variable's name, like every other setting of the service,
instead of being logged and ignored as the SDK would do.

Tracing is off unless OTEL_TRACES_EXPORTER names an exporter: the service is run without
a collector as often as with one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar
from urllib.parse import unquote, urlsplit

DEFAULT_SERVICE_NAME = "jobqueue"
DEFAULT_OTLP_ENDPOINT = "http://localhost:4318"
TRACES_PATH = "v1/traces"
HTTP_PROTOBUF = "http/protobuf"

T = TypeVar("T")


# (variable, default shown in help, meaning): every variable read here, for `--help` and
# the README's tracing table (a test compares them). The OpenTelemetry SDK's own
# variables (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION, _CERTIFICATE, and their
# TRACES_ forms) are honoured by the exporter itself.
TRACING_ENVIRONMENT: tuple[tuple[str, str, str], ...] = (
    ("OTEL_TRACES_EXPORTER", "none", "otlp, console (stderr) or none; comma-separated"),
    ("OTEL_EXPORTER_OTLP_ENDPOINT", DEFAULT_OTLP_ENDPOINT, "collector base URL (/v1/traces added)"),
    ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "unset", "full traces URL, used as given"),
    ("OTEL_EXPORTER_OTLP_PROTOCOL", HTTP_PROTOBUF, "only http/protobuf is installed"),
    ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "unset", "the same for traces only; wins if set"),
    ("OTEL_SERVICE_NAME", DEFAULT_SERVICE_NAME, "service.name of the spans"),
    ("OTEL_RESOURCE_ATTRIBUTES", "unset", "more resource attributes, key=value,..."),
    ("OTEL_TRACES_SAMPLER", "parentbased_always_on", "always_on, traceidratio, parentbased_*..."),
    ("OTEL_TRACES_SAMPLER_ARG", "1.0", "ratio of the traceidratio samplers, 0 to 1"),
    ("OTEL_BSP_SCHEDULE_DELAY", "5000", "milliseconds between span exports"),
    ("OTEL_BSP_EXPORT_TIMEOUT", "30000", "milliseconds one export may take"),
    ("OTEL_BSP_MAX_QUEUE_SIZE", "2048", "spans waiting for export; more are dropped"),
    ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "512", "spans per export; at most the queue size"),
    ("OTEL_SDK_DISABLED", "false", "true: tracing off, whatever else is set"),
)


class Exporter(StrEnum):
    OTLP = "otlp"
    CONSOLE = "console"


class Sampler(StrEnum):
    ALWAYS_ON = "always_on"
    ALWAYS_OFF = "always_off"
    TRACE_ID_RATIO = "traceidratio"
    PARENT_BASED_ALWAYS_ON = "parentbased_always_on"
    PARENT_BASED_ALWAYS_OFF = "parentbased_always_off"
    PARENT_BASED_TRACE_ID_RATIO = "parentbased_traceidratio"

    @property
    def takes_ratio(self) -> bool:
        return self in (Sampler.TRACE_ID_RATIO, Sampler.PARENT_BASED_TRACE_ID_RATIO)


# Standard values this build cannot honour, with what to do instead.
_UNSUPPORTED_PROTOCOLS = {
    "grpc": "needs opentelemetry-exporter-otlp-proto-grpc, which is not installed",
    "http/json": "has no exporter in the OpenTelemetry Python SDK",
}


class TracingConfigError(ValueError):
    """The tracing variables cannot be used; one line per problem, each naming its variable."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True, slots=True)
class TracingConfig:
    """What `start_tracing` builds. The default is tracing off."""

    exporters: tuple[Exporter, ...] = ()
    # OTEL_SERVICE_NAME; None leaves `service.name` to the resource attributes, and to
    # DEFAULT_SERVICE_NAME when they do not say either.
    service_name: str | None = None
    # From OTEL_RESOURCE_ATTRIBUTES, in the order given; OTEL_SERVICE_NAME wins over a
    # `service.name` among them.
    resource_attributes: tuple[tuple[str, str], ...] = ()
    otlp_endpoint: str = f"{DEFAULT_OTLP_ENDPOINT}/{TRACES_PATH}"
    sampler: Sampler = Sampler.PARENT_BASED_ALWAYS_ON
    sampler_ratio: float = 1.0
    # The batch span processor's settings (OTEL_BSP_*), in milliseconds and spans.
    schedule_delay_ms: int = 5_000
    export_timeout_ms: int = 30_000
    max_queue_size: int = 2_048
    max_export_batch_size: int = 512

    @property
    def enabled(self) -> bool:
        return bool(self.exporters)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> TracingConfig:
        """Raise `TracingConfigError` listing every unusable variable at once."""
        reader = _Reader(environ)
        defaults = cls()
        if reader.flag("OTEL_SDK_DISABLED"):
            return defaults
        exporters = reader.parse("OTEL_TRACES_EXPORTER", parse_exporters, defaults.exporters)
        if not exporters:
            # Off: nothing else is read, so variables meant for other tools (or for
            # another day) cannot stop the service.
            if reader.problems:
                raise TracingConfigError(reader.problems)
            return defaults
        endpoint = defaults.otlp_endpoint
        if Exporter.OTLP in exporters:
            # Checked only when OTLP is chosen: a platform may set these for its metrics
            # or logs while traces are off.
            reader.check_protocol()
            endpoint = reader.otlp_endpoint()
        sampler = reader.parse("OTEL_TRACES_SAMPLER", parse_sampler, defaults.sampler)
        ratio = defaults.sampler_ratio
        if sampler.takes_ratio:
            ratio = reader.parse("OTEL_TRACES_SAMPLER_ARG", parse_ratio, defaults.sampler_ratio)
        config = cls(
            exporters=exporters,
            service_name=reader.raw("OTEL_SERVICE_NAME"),
            resource_attributes=reader.parse(
                "OTEL_RESOURCE_ATTRIBUTES", parse_resource_attributes, defaults.resource_attributes
            ),
            otlp_endpoint=endpoint,
            sampler=sampler,
            sampler_ratio=ratio,
            schedule_delay_ms=reader.parse(
                "OTEL_BSP_SCHEDULE_DELAY", _milliseconds, defaults.schedule_delay_ms
            ),
            export_timeout_ms=reader.parse(
                "OTEL_BSP_EXPORT_TIMEOUT", _milliseconds, defaults.export_timeout_ms
            ),
            max_queue_size=reader.parse("OTEL_BSP_MAX_QUEUE_SIZE", _count, defaults.max_queue_size),
            max_export_batch_size=reader.parse(
                "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", _count, defaults.max_export_batch_size
            ),
        )
        if config.max_export_batch_size > config.max_queue_size:
            reader.problems.append(
                f"OTEL_BSP_MAX_EXPORT_BATCH_SIZE: {config.max_export_batch_size} exceeds "
                f"OTEL_BSP_MAX_QUEUE_SIZE ({config.max_queue_size})"
            )
        if reader.problems:
            raise TracingConfigError(reader.problems)
        return config


class _Reader:
    """Reads variables, collecting problems instead of stopping at the first."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ
        self.problems: list[str] = []

    def raw(self, name: str) -> str | None:
        # An empty value counts as unset, as the specification asks.
        value = self._environ.get(name, "").strip()
        return value or None

    def parse(self, name: str, parse: Callable[[str], T], default: T) -> T:
        raw = self.raw(name)
        if raw is None:
            return default
        try:
            return parse(raw)
        except ValueError as error:
            self.problems.append(f"{name}: {error}")
            return default

    def flag(self, name: str) -> bool:
        raw = self.raw(name)
        return raw is not None and raw.lower() == "true"

    def check_protocol(self) -> None:
        for name in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
            raw = self.raw(name)
            if raw is None:
                continue
            if raw != HTTP_PROTOBUF:
                reason = _UNSUPPORTED_PROTOCOLS.get(raw, "is not an OTLP protocol")
                self.problems.append(
                    f"{name}: {raw!r} {reason}; use {HTTP_PROTOBUF} (the default), whose "
                    f"collector port is 4318, e.g. OTEL_EXPORTER_OTLP_ENDPOINT="
                    f"{DEFAULT_OTLP_ENDPOINT}"
                )
            # The traces-specific variable overrides the general one, whatever it says.
            return

    def otlp_endpoint(self) -> str:
        # The traces endpoint is used as given; the general one is a base URL to which
        # each signal appends its own path.
        if self.raw("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") is not None:
            return self.parse("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", parse_http_url, "")
        base = self.parse("OTEL_EXPORTER_OTLP_ENDPOINT", parse_http_url, DEFAULT_OTLP_ENDPOINT)
        return f"{base.rstrip('/')}/{TRACES_PATH}"


# --- one value ----------------------------------------------------------------------------


def parse_exporters(raw: str) -> tuple[Exporter, ...]:
    names = [part.strip().lower() for part in raw.split(",") if part.strip()]
    if names == ["none"]:
        return ()
    if "none" in names:
        raise ValueError(f"{raw!r} combines 'none' with exporters; use one or the other")
    exporters: list[Exporter] = []
    for name in names:
        try:
            exporter = Exporter(name)
        except ValueError:
            raise ValueError(
                f"{name!r} is not a supported exporter; use otlp, console or none"
            ) from None
        if exporter not in exporters:
            exporters.append(exporter)
    return tuple(exporters)


def parse_sampler(raw: str) -> Sampler:
    try:
        return Sampler(raw.lower())
    except ValueError:
        choices = ", ".join(sampler.value for sampler in Sampler)
        raise ValueError(f"{raw!r} is not a supported sampler; use one of {choices}") from None


def parse_ratio(raw: str) -> float:
    try:
        ratio = float(raw)
    except ValueError:
        raise ValueError(f"{raw!r} is not a number; use a sampling ratio from 0 to 1") from None
    if not (math.isfinite(ratio) and 0.0 <= ratio <= 1.0):
        raise ValueError(f"{raw!r} is not a sampling ratio from 0 to 1")
    return ratio


def parse_http_url(raw: str) -> str:
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{raw!r} is not an http:// or https:// URL with a host")
    return raw


def parse_resource_attributes(raw: str) -> tuple[tuple[str, str], ...]:
    """`key=value` pairs separated by commas, values percent-encoded (W3C Baggage style)."""
    pairs: list[tuple[str, str]] = []
    for position, item in enumerate(raw.split(","), start=1):
        if not item.strip():
            continue
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise ValueError(f"entry {position} ({item.strip()!r}) is not key=value")
        pairs.append((key.strip(), unquote(value.strip())))
    return tuple(pairs)


def _milliseconds(raw: str) -> int:
    if not raw.isdigit():
        raise ValueError(f"{raw!r} is not a whole number of milliseconds")
    return int(raw)


def _count(raw: str) -> int:
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{raw!r} is not a whole number of at least 1")
    return int(raw)
