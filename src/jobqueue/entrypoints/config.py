"""Settings: one frozen object built from the environment at the entrypoint, passed down.

Every variable is optional. A bad value stops the process before it starts anything,
with every problem listed at once, so a misconfigured deployment is fixed in one round.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from jobqueue.adapters.telemetry.tracing_config import TracingConfig, TracingConfigError
from jobqueue.domain.backoff import Backoff
from jobqueue.domain.durations import format_duration, parse_duration
from jobqueue.domain.job import MAX_ATTEMPTS, MIN_ATTEMPTS
from jobqueue.entrypoints.worker.pool import PoolConfig
from jobqueue.entrypoints.worker.retention import (
    DEFAULT_COMPLETED,
    DEFAULT_FAILED,
    RetentionPolicy,
)
from jobqueue.entrypoints.worker.retention import DEFAULT_INTERVAL as DEFAULT_RETENTION_INTERVAL

# An attempt's outcome is written after its handler returns; the lease must outlast the
# handler's timeout by at least this much, and the write is bounded by it.
LEASE_MARGIN = timedelta(seconds=5)
MAX_WORKERS = 10_000
MIN_BODY_BYTES = 64
MAX_BODY_BYTES = 1 << 30
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
TRACING_OFF = TracingConfig()
# The value of METRICS_ADDR that turns the separate metrics listener off.
METRICS_OFF: Literal["off"] = "off"


class ConfigError(ValueError):
    """The configuration cannot be used; `problems` says why, one line per problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True, slots=True)
class HttpAddress:
    host: str
    port: int
    # As configured (":8080"), for messages that the operator will recognise.
    text: str

    def __str__(self) -> str:
        return self.text


# `jobqueue worker` serves no API: without a listener of its own its metrics and probes
# would be invisible. serve and api have them on HTTP_ADDR already, so they open none.
WORKER_METRICS_ADDR = HttpAddress("0.0.0.0", 9090, ":9090")


# (variable, default shown in help, meaning). The order is the order of `--help`.
ENVIRONMENT: tuple[tuple[str, str, str], ...] = (
    ("DATABASE_URL", "unset", "PostgreSQL URL; unset: an embedded server in JOBQUEUE_DATA_DIR"),
    ("JOBQUEUE_DATA_DIR", ".jobqueue/pgdata", "data directory of the embedded server"),
    ("HTTP_ADDR", ":8080", "API listen address, host:port or :port (all interfaces)"),
    (
        "METRICS_ADDR",
        ":9090 for worker, none for serve/api",
        "extra listener for /metrics, /healthz, /readyz only; off: none",
    ),
    ("WORKERS", "4", "attempts run at once by this process"),
    ("MAX_ATTEMPTS", "5", "default attempt budget of a job (1-100)"),
    ("JOB_TIMEOUT", "30s", "limit of one attempt"),
    ("LEASE_DURATION", "1m", "claim lease; must exceed JOB_TIMEOUT + 5s"),
    ("RECOVERY_INTERVAL", "30s", "how often expired leases are recovered"),
    ("RETENTION_COMPLETED", "168h", "delete completed jobs this long after; 0 keeps them"),
    ("RETENTION_FAILED", "720h", "delete failed jobs this long after; 0 keeps them"),
    ("RETENTION_INTERVAL", "1m", "how often old jobs are deleted (dead letters never are)"),
    ("POLL_INTERVAL", "1s", "idle workers look for due jobs at least this often"),
    ("NOTIFY", "true", "instant wake-ups across processes (LISTEN/NOTIFY); false for PgBouncer"),
    ("BACKOFF_BASE", "1s", "delay before the 2nd attempt; doubles each retry, jittered"),
    ("BACKOFF_MAX", "5m", "cap of the retry delay"),
    ("SHUTDOWN_TIMEOUT", "20s", "running jobs' grace at shutdown before they are released"),
    ("DRAIN_DELAY", "0s", "keep serving HTTP this long after /readyz turns 503"),
    ("MAX_BODY_BYTES", "1MiB", "request body limit (bytes, or with KiB/MiB/KB/MB)"),
    ("WEBHOOK_ALLOW_PRIVATE", "false", "let webhook jobs call private/loopback addresses"),
    ("LOG_LEVEL", "INFO", "DEBUG, INFO, WARNING, ERROR or CRITICAL"),
    ("AUTO_MIGRATE", "true", "apply database migrations at start (serve, api, worker)"),
    ("JOBQUEUE_HANDLERS", "unset", "module(s) with a `registry` of handlers, comma-separated"),
    ("API_TOKENS", "unset", "comma-separated bearer tokens required by /jobs routes"),
)


@dataclass(frozen=True, slots=True)
class Settings:
    """The service's configuration. Construct with `from_env`, or directly in tests;
    either way an unusable combination raises `ConfigError`."""

    database_url: str | None = field(default=None, repr=False)
    data_dir: Path = Path(".jobqueue/pgdata")
    http_addr: HttpAddress = HttpAddress("0.0.0.0", 8080, ":8080")
    # None: the command's default (`metrics_listener`); METRICS_OFF: no listener.
    metrics_addr: HttpAddress | Literal["off"] | None = None
    workers: int = 4
    max_attempts: int = 5
    job_timeout: timedelta = timedelta(seconds=30)
    lease_duration: timedelta = timedelta(minutes=1)
    recovery_interval: timedelta = timedelta(seconds=30)
    # 0 keeps those jobs forever; dead-lettered jobs are never deleted automatically.
    retention_completed: timedelta = DEFAULT_COMPLETED
    retention_failed: timedelta = DEFAULT_FAILED
    retention_interval: timedelta = DEFAULT_RETENTION_INTERVAL
    poll_interval: timedelta = timedelta(seconds=1)
    notify: bool = True
    backoff_base: timedelta = timedelta(seconds=1)
    backoff_max: timedelta = timedelta(minutes=5)
    shutdown_timeout: timedelta = timedelta(seconds=20)
    drain_delay: timedelta = timedelta(0)
    max_body_bytes: int = 1 << 20
    webhook_allow_private: bool = False
    log_level: str = "INFO"
    auto_migrate: bool = True
    handler_modules: tuple[str, ...] = ()
    api_tokens: frozenset[str] = field(default=frozenset(), repr=False)
    # From the standard OTEL_* variables (TRACING_ENVIRONMENT); off by default.
    tracing: TracingConfig = TRACING_OFF

    def __post_init__(self) -> None:
        problems = _check(_values_of(self), skip=frozenset())
        if problems:
            raise ConfigError(problems)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Read every variable of `ENVIRONMENT`, and the tracing ones; an empty value
        counts as unset."""
        problems: list[str] = []
        values: dict[str, Any] = {}
        failed: set[str] = set()
        for name, (attribute, parse) in _PARSERS.items():
            raw = environ.get(name, "").strip()
            if not raw:
                continue
            try:
                values[attribute] = parse(raw)
            except ValueError as error:
                problems.append(f"{name}: {error}")
                failed.add(attribute)
        try:
            values["tracing"] = TracingConfig.from_env(environ)
        except TracingConfigError as error:
            problems.extend(error.problems)
        merged = {**_defaults(), **values}
        problems.extend(_check(merged, skip=frozenset(failed)))
        if problems:
            raise ConfigError(problems)
        return cls(**values)

    def pool_config(self) -> PoolConfig:
        return PoolConfig(
            workers=self.workers,
            job_timeout=self.job_timeout,
            lease_duration=self.lease_duration,
            poll_interval=self.poll_interval,
            shutdown_timeout=self.shutdown_timeout,
            outcome_timeout=LEASE_MARGIN,
            backoff=Backoff(self.backoff_base, self.backoff_max),
        )

    def metrics_listener(self, *, serves_api: bool) -> HttpAddress | None:
        """Where the separate metrics server listens, or None for no such server.

        Unset, it runs only in a process without the API (`jobqueue worker`): the API
        serves the same endpoints on HTTP_ADDR.
        """
        if isinstance(self.metrics_addr, HttpAddress):
            return self.metrics_addr
        if self.metrics_addr is None and not serves_api:
            return WORKER_METRICS_ADDR
        return None

    def retention_policy(self) -> RetentionPolicy:
        # A zero duration is falsy: 0 configures "keep forever", which the policy spells None.
        return RetentionPolicy(
            completed=self.retention_completed or None,
            failed=self.retention_failed or None,
        )


# --- parsing one variable ------------------------------------------------------------


def parse_http_addr(raw: str) -> HttpAddress:
    if raw.startswith("["):
        host, bracket, rest = raw[1:].partition("]")
        if not bracket or not rest.startswith(":"):
            raise ValueError(f"{raw!r} is not host:port; write IPv6 hosts as [::1]:8080")
        port_text = rest[1:]
    else:
        host, colon, port_text = raw.rpartition(":")
        if not colon:
            raise ValueError(f"{raw!r} has no port; use host:port or :port, e.g. ':8080'")
        if ":" in host:
            raise ValueError(f"{raw!r}: write IPv6 hosts in brackets, as in [::1]:8080")
    if any(character.isspace() for character in host):
        raise ValueError(f"{raw!r}: the host contains whitespace")
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"{raw!r}: the port must be a number from 1 to 65535")
    return HttpAddress(host or "0.0.0.0", int(port_text), raw)


def parse_metrics_addr(raw: str) -> HttpAddress | Literal["off"]:
    if raw.lower() == METRICS_OFF:
        return METRICS_OFF
    try:
        return parse_http_addr(raw)
    except ValueError as error:
        raise ValueError(f"{error}; or {METRICS_OFF} for no metrics listener") from None


def parse_bool(raw: str) -> bool:
    lowered = raw.lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"{raw!r} is not a boolean; use true or false")


def parse_int(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{raw!r} is not a whole number") from None


_SIZE = re.compile(r"(\d+)\s*([KMG]i?B|B)?", re.IGNORECASE)
_SIZE_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9}
_SIZE_UNITS |= {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}


def parse_size(raw: str) -> int:
    match = _SIZE.fullmatch(raw)
    if match is None:
        raise ValueError(f"{raw!r} is not a size; use bytes or a unit, e.g. 1048576 or 1MiB")
    unit = (match.group(2) or "b").lower()
    return int(match.group(1)) * _SIZE_UNITS[unit]


def parse_log_level(raw: str) -> str:
    level = raw.upper()
    if level == "WARN":
        return "WARNING"
    if level not in LOG_LEVELS:
        raise ValueError(f"{raw!r} is not a log level; use one of {', '.join(LOG_LEVELS)}")
    return level


def parse_database_url(raw: str) -> str:
    # Imported here: SQLAlchemy takes long to import, and `--help` needs none of it.
    from jobqueue.adapters.postgres.database import normalize_url

    try:
        normalize_url(raw)
    except ValueError as error:
        # The message never repeats the URL: it may hold a password.
        raise ValueError(str(error)) from None
    return raw


_MODULE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def parse_modules(raw: str) -> tuple[str, ...]:
    modules = tuple(part.strip() for part in raw.split(",") if part.strip())
    for module in modules:
        if not _MODULE.fullmatch(module):
            raise ValueError(f"{module!r} is not a module path such as 'mypackage.jobs'")
    return modules


def parse_tokens(raw: str) -> frozenset[str]:
    tokens = [part.strip() for part in raw.split(",") if part.strip()]
    if not tokens:
        raise ValueError("holds no token; unset it to turn authentication off")
    for position, token in enumerate(tokens, start=1):
        # Tokens are never echoed: they are secrets. Their position is enough.
        if not all("!" <= character <= "~" for character in token):
            raise ValueError(
                f"token {position} contains characters other than visible ASCII; an "
                "Authorization header cannot carry it"
            )
    return frozenset(tokens)


def _duration(raw: str) -> timedelta:
    return parse_duration(raw)


def _path(raw: str) -> Path:
    return Path(raw).expanduser()


_PARSERS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "DATABASE_URL": ("database_url", parse_database_url),
    "JOBQUEUE_DATA_DIR": ("data_dir", _path),
    "HTTP_ADDR": ("http_addr", parse_http_addr),
    "METRICS_ADDR": ("metrics_addr", parse_metrics_addr),
    "WORKERS": ("workers", parse_int),
    "MAX_ATTEMPTS": ("max_attempts", parse_int),
    "JOB_TIMEOUT": ("job_timeout", _duration),
    "LEASE_DURATION": ("lease_duration", _duration),
    "RECOVERY_INTERVAL": ("recovery_interval", _duration),
    "RETENTION_COMPLETED": ("retention_completed", _duration),
    "RETENTION_FAILED": ("retention_failed", _duration),
    "RETENTION_INTERVAL": ("retention_interval", _duration),
    "POLL_INTERVAL": ("poll_interval", _duration),
    "NOTIFY": ("notify", parse_bool),
    "BACKOFF_BASE": ("backoff_base", _duration),
    "BACKOFF_MAX": ("backoff_max", _duration),
    "SHUTDOWN_TIMEOUT": ("shutdown_timeout", _duration),
    "DRAIN_DELAY": ("drain_delay", _duration),
    "MAX_BODY_BYTES": ("max_body_bytes", parse_size),
    "WEBHOOK_ALLOW_PRIVATE": ("webhook_allow_private", parse_bool),
    "LOG_LEVEL": ("log_level", parse_log_level),
    "AUTO_MIGRATE": ("auto_migrate", parse_bool),
    "JOBQUEUE_HANDLERS": ("handler_modules", parse_modules),
    "API_TOKENS": ("api_tokens", parse_tokens),
}
_NAMES = {attribute: name for name, (attribute, _) in _PARSERS.items()}


# --- checking the whole ------------------------------------------------------------------


def _check(values: Mapping[str, Any], skip: frozenset[str]) -> list[str]:
    """Range and consistency problems of a complete set of values.

    A check is skipped when a value it reads failed to parse (`skip`): its problem is
    reported already, and comparing against a default would only confuse.
    """
    problems: list[str] = []

    def rule(attributes: tuple[str, ...], ok: Callable[..., bool], message: str) -> None:
        if skip.intersection(attributes):
            return
        if not ok(*(values[attribute] for attribute in attributes)):
            problems.append(message.format(*(_shown(values[a]) for a in attributes)))

    rule(
        ("workers",),
        lambda n: 1 <= n <= MAX_WORKERS,
        f"WORKERS: {{}} is not between 1 and {MAX_WORKERS}",
    )
    rule(
        ("max_attempts",),
        lambda n: MIN_ATTEMPTS <= n <= MAX_ATTEMPTS,
        f"MAX_ATTEMPTS: {{}} is not between {MIN_ATTEMPTS} and {MAX_ATTEMPTS}",
    )
    for attribute in (
        "job_timeout",
        "lease_duration",
        "recovery_interval",
        "retention_interval",
        "poll_interval",
        "backoff_base",
    ):
        rule((attribute,), _positive, f"{_NAMES[attribute]}: must be longer than 0, got {{}}")
    rule(
        ("lease_duration", "job_timeout"),
        lambda lease, timeout: lease > timeout + LEASE_MARGIN,
        "LEASE_DURATION: {} must exceed JOB_TIMEOUT ({}) + "
        f"{format_duration(LEASE_MARGIN)}, or an attempt near its timeout would lose its "
        "lease before recording its outcome",
    )
    for attribute in ("retention_completed", "retention_failed"):
        rule(
            (attribute,),
            lambda age: age >= timedelta(0),
            f"{_NAMES[attribute]}: must not be negative, got {{}}; 0 keeps the jobs",
        )
    rule(
        ("backoff_max", "backoff_base"),
        lambda cap, base: cap >= base,
        "BACKOFF_MAX: {} is shorter than BACKOFF_BASE ({})",
    )
    rule(
        ("max_body_bytes",),
        lambda n: MIN_BODY_BYTES <= n <= MAX_BODY_BYTES,
        f"MAX_BODY_BYTES: {{}} is not between {MIN_BODY_BYTES} and {MAX_BODY_BYTES} bytes",
    )
    return problems


def _positive(value: timedelta) -> bool:
    return value > timedelta(0)


def _shown(value: object) -> str:
    return format_duration(value) if isinstance(value, timedelta) else str(value)


def _values_of(settings: Settings) -> dict[str, Any]:
    return {f.name: getattr(settings, f.name) for f in fields(settings)}


def _defaults() -> dict[str, Any]:
    return {f.name: f.default for f in fields(Settings)}
