"""Settings: one frozen object built from the environment at the entrypoint, passed down.

Each setting is declared once, as a field of `Settings` made by `setting(...)`: its
variable, parser, default, help and the commands that use it. `SETTINGS`, the table read
back from those fields, drives `from_env`, the messages naming variables, `--help` and
the check that the README's configuration table agrees.

Every variable is optional. A bad value stops the process before it starts anything,
with every problem listed at once, so a misconfigured deployment is fixed in one round.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from jobqueue.adapters.postgres.pooler import Pooler
from jobqueue.adapters.results import DEFAULT_RESULT_MAX_BYTES
from jobqueue.adapters.telemetry.logging import LogFormat
from jobqueue.adapters.telemetry.tracing_config import TracingConfig, TracingConfigError
from jobqueue.domain.durations import parse_duration
from jobqueue.domain.fields import DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE, MAX_ATTEMPTS, MIN_ATTEMPTS
from jobqueue.domain.outcome import DEFAULT_MAX_SNOOZES
from jobqueue.domain.retention import DEFAULT_COMPLETED, DEFAULT_FAILED, RetentionPolicy
from jobqueue.entrypoints.config.rules import ConfigError, check
from jobqueue.entrypoints.config.variables import (
    ALL_COMMANDS,
    API_HTTP_ADDR,
    EXCEPT_BENCH,
    LOG_LEVELS,
    METRICS_OFF,
    SERVE_HTTP_ADDR,
    SERVICES,
    SETTING_KEY,
    WITH_API,
    WITH_WORKERS,
    WORKER_METRICS_ADDR,
    HttpAddress,
    QueueConcurrency,
    QueueLimitsEntry,
    Setting,
    format_size,
    parse_bool,
    parse_database_url,
    parse_http_addr,
    parse_int,
    parse_log_format,
    parse_log_level,
    parse_metrics_addr,
    parse_modules,
    parse_path,
    parse_pooler,
    parse_queue_limits,
    parse_queues,
    parse_size,
    parse_tokens,
    parse_trace_url,
    read_environment,
    setting,
    show_queue_limits,
    show_queues,
)
from jobqueue.entrypoints.worker.retention import DEFAULT_INTERVAL as DEFAULT_RETENTION_INTERVAL

TRACING_OFF = TracingConfig()


@dataclass(frozen=True, slots=True)
class Settings:
    """The service's configuration. Construct with `from_env`, or directly in tests;
    either way an unusable combination raises `ConfigError`.

    The order of the fields is the order of `--help` and of the README's table."""

    database_url: str | None = setting(
        "DATABASE_URL",
        parse_database_url,
        None,
        "PostgreSQL URL; unset: an embedded server in JOBQUEUE_DATA_DIR",
        commands=ALL_COMMANDS,
        secret=True,
    )
    database_pooler: Pooler = setting(
        "DATABASE_POOLER",
        parse_pooler,
        Pooler.NONE,
        "pgbouncer: DATABASE_URL is PgBouncer in transaction mode (no statement caches; "
        "needs NOTIFY=false, AUTO_MIGRATE=false); none: PostgreSQL itself",
        # migrate reads it only to refuse it: migrations need PostgreSQL itself.
        commands=SERVICES | {"migrate"},
    )
    data_dir: Path = setting(
        "JOBQUEUE_DATA_DIR",
        parse_path,
        Path(".jobqueue/pgdata"),
        "data directory of the embedded server",
        commands=EXCEPT_BENCH,
    )
    http_addr: HttpAddress | None = setting(
        "HTTP_ADDR",
        parse_http_addr,
        None,
        "API listen address, host:port or :port (all interfaces)",
        commands=WITH_API,
        shown=f"{SERVE_HTTP_ADDR} for serve, {API_HTTP_ADDR} for api",
    )
    # None: the command's default (`metrics_listener`); METRICS_OFF: no listener.
    metrics_addr: HttpAddress | Literal["off"] | None = setting(
        "METRICS_ADDR",
        parse_metrics_addr,
        None,
        f"extra listener for /metrics, /healthz, /readyz only; {METRICS_OFF}: none",
        commands=SERVICES,
        shown=f"{WORKER_METRICS_ADDR} for worker, none for serve/api",
    )
    workers: int = setting(
        "WORKERS",
        parse_int,
        4,
        "attempts run at once, per queue given no number in QUEUES",
        commands=WITH_WORKERS,
    )
    queues: tuple[QueueConcurrency, ...] = setting(
        "QUEUES",
        parse_queues,
        ((DEFAULT_QUEUE, None),),
        "the queues this process consumes, each with how many of its jobs run at once "
        "(default=10,emails=2; a queue given no number runs WORKERS)",
        commands=WITH_WORKERS,
        shown=show_queues,
    )
    queue_limits: tuple[QueueLimitsEntry, ...] = setting(
        "QUEUE_LIMITS",
        parse_queue_limits,
        (),
        "limits across every process, per queue (emails concurrency=5 rate=100/1m; "
        "reports concurrency=2), written as a worker starts unless an operator set its own",
        commands=WITH_WORKERS,
        shown=show_queue_limits,
    )
    max_attempts: int = setting(
        "MAX_ATTEMPTS",
        parse_int,
        DEFAULT_MAX_ATTEMPTS,
        f"attempt budget of a job whose submission and type give none "
        f"({MIN_ATTEMPTS}-{MAX_ATTEMPTS}); in-process enqueue reads it too",
        commands=SERVICES,
    )
    job_timeout: timedelta = setting(
        "JOB_TIMEOUT",
        parse_duration,
        timedelta(seconds=30),
        "limit of one attempt",
        commands=WITH_WORKERS,
    )
    max_snoozes: int = setting(
        "MAX_SNOOZES",
        parse_int,
        DEFAULT_MAX_SNOOZES,
        "how often a job may snooze (a handler's Snooze) before each snooze uses up an attempt",
        commands=WITH_WORKERS,
    )
    result_max_bytes: int = setting(
        "RESULT_MAX_BYTES",
        parse_size,
        DEFAULT_RESULT_MAX_BYTES,
        "the largest result a handler may return, as JSON; a larger one fails its job",
        commands=WITH_WORKERS,
        shown=format_size,
    )
    lease_duration: timedelta = setting(
        "LEASE_DURATION",
        parse_duration,
        timedelta(seconds=30),
        "claim lease, renewed every third of it while the attempt runs; a crashed "
        "process's jobs come back about this long after it died",
        commands=WITH_WORKERS,
    )
    statement_timeout: timedelta = setting(
        "STATEMENT_TIMEOUT",
        parse_duration,
        timedelta(seconds=5),
        "server-side limit of every statement the service sends (statement_timeout)",
        commands=SERVICES,
    )
    db_client_timeout: timedelta = setting(
        "DB_CLIENT_TIMEOUT",
        parse_duration,
        timedelta(seconds=6),
        "client-side limit of connecting and of each statement's round trip",
        commands=SERVICES,
    )
    recovery_interval: timedelta = setting(
        "RECOVERY_INTERVAL",
        parse_duration,
        timedelta(seconds=30),
        "how often expired leases are recovered",
        commands=WITH_WORKERS,
    )
    # 0 keeps those jobs forever; dead-lettered jobs are never deleted automatically.
    retention_completed: timedelta = setting(
        "RETENTION_COMPLETED",
        parse_duration,
        DEFAULT_COMPLETED,
        "delete completed jobs this long after; 0 keeps them",
        commands=WITH_WORKERS,
    )
    retention_failed: timedelta = setting(
        "RETENTION_FAILED",
        parse_duration,
        DEFAULT_FAILED,
        "delete failed and cancelled jobs this long after; 0 keeps them",
        commands=WITH_WORKERS,
    )
    retention_interval: timedelta = setting(
        "RETENTION_INTERVAL",
        parse_duration,
        DEFAULT_RETENTION_INTERVAL,
        "how often old jobs are deleted (dead letters never are)",
        commands=WITH_WORKERS,
    )
    poll_interval: timedelta = setting(
        "POLL_INTERVAL",
        parse_duration,
        timedelta(seconds=1),
        "idle workers look for due jobs at least this often; an API's waits for jobs' "
        "ends re-read them this often when no notification can come",
        commands=SERVICES,
    )
    notify: bool = setting(
        "NOTIFY",
        parse_bool,
        True,
        "instant wake-ups across processes (LISTEN/NOTIFY); false for PgBouncer",
        commands=SERVICES,
    )
    backoff_base: timedelta = setting(
        "BACKOFF_BASE",
        parse_duration,
        timedelta(seconds=1),
        "delay before the 2nd attempt; doubles each retry, jittered",
        commands=WITH_WORKERS,
    )
    backoff_max: timedelta = setting(
        "BACKOFF_MAX",
        parse_duration,
        timedelta(minutes=5),
        "cap of the retry delay",
        commands=WITH_WORKERS,
    )
    shutdown_timeout: timedelta = setting(
        "SHUTDOWN_TIMEOUT",
        parse_duration,
        timedelta(seconds=20),
        "running jobs' grace at shutdown before they are released",
        commands=SERVICES,
    )
    drain_delay: timedelta = setting(
        "DRAIN_DELAY",
        parse_duration,
        timedelta(0),
        "keep serving HTTP this long after /readyz turns 503",
        commands=WITH_API,
    )
    max_body_bytes: int = setting(
        "MAX_BODY_BYTES",
        parse_size,
        1 << 20,
        "request body limit (bytes, or with KiB/MiB/KB/MB)",
        commands=WITH_API,
        shown=format_size,
    )
    http_read_timeout: timedelta = setting(
        "HTTP_READ_TIMEOUT",
        parse_duration,
        timedelta(seconds=10),
        "a request's headers and body must arrive within this of its first byte (or of "
        "the connection opening), or the connection is closed (408)",
        commands=SERVICES,
    )
    http_max_connections: int = setting(
        "HTTP_MAX_CONNECTIONS",
        parse_int,
        1000,
        "open connections per listener; those past it are closed as they open",
        commands=SERVICES,
    )
    builtin_handlers: bool = setting(
        "BUILTIN_HANDLERS",
        parse_bool,
        True,
        "serve the example job types sleep and webhook (false for a public deployment)",
        commands=SERVICES,
    )
    webhook_allow_private: bool = setting(
        "WEBHOOK_ALLOW_PRIVATE",
        parse_bool,
        False,
        "let webhook jobs call private/loopback addresses (refused at submission and "
        "when connecting otherwise)",
        commands=SERVICES,
    )
    log_level: str = setting(
        "LOG_LEVEL",
        parse_log_level,
        "INFO",
        f"{', '.join(LOG_LEVELS[:-1])} or {LOG_LEVELS[-1]}",
        commands=EXCEPT_BENCH,
    )
    log_format: LogFormat | None = setting(
        "LOG_FORMAT",
        parse_log_format,
        None,
        "json (one object per line) or text (for people)",
        commands=EXCEPT_BENCH,
        shown="text on a terminal, json otherwise",
    )
    auto_migrate: bool = setting(
        "AUTO_MIGRATE",
        parse_bool,
        True,
        "apply database migrations at start (serve, api, worker)",
        commands=SERVICES,
    )
    handler_modules: tuple[str, ...] = setting(
        "JOBQUEUE_HANDLERS",
        parse_modules,
        (),
        "module(s) with a `registry` of handlers, comma-separated",
        commands=SERVICES,
    )
    api_tokens: frozenset[str] = setting(
        "API_TOKENS",
        parse_tokens,
        frozenset(),
        "comma-separated bearer tokens every route requires but the probes, /metrics "
        "and the docs page's assets",
        commands=WITH_API,
        secret=True,
    )
    dashboard_read_only: bool = setting(
        "DASHBOARD_READ_ONLY",
        parse_bool,
        False,
        "true: the dashboard shows everything and refuses every action",
        commands=WITH_API,
    )
    trace_url: str | None = setting(
        "TRACE_URL",
        parse_trace_url,
        None,
        "a trace's page in your tracing UI, {trace_id} in it: the dashboard links there",
        commands=WITH_API,
    )
    # From the standard OTEL_* variables (TRACING_ENVIRONMENT); off by default.
    tracing: TracingConfig = TRACING_OFF

    def __post_init__(self) -> None:
        problems = check(_values_of(self), skip=frozenset(), variables=VARIABLES)
        if problems:
            raise ConfigError(problems)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Read every variable of `SETTINGS`, and the tracing ones; empty means unset."""
        values, failed, problems = read_environment(SETTINGS, environ)
        try:
            values["tracing"] = TracingConfig.from_env(environ)
        except TracingConfigError as error:
            problems.extend(error.problems)
        merged = {**defaults(), **values}
        problems.extend(check(merged, skip=frozenset(failed), variables=VARIABLES))
        if problems:
            raise ConfigError(problems)
        return cls(**values)

    def retention_policy(self) -> RetentionPolicy:
        return RetentionPolicy.configured(self.retention_completed, self.retention_failed)


# The settings table, in declaration order.
SETTINGS: tuple[Setting, ...] = tuple(
    replace(f.metadata[SETTING_KEY], attribute=f.name)
    for f in fields(Settings)
    if SETTING_KEY in f.metadata
)
VARIABLES = {row.attribute: row.env for row in SETTINGS}


def _values_of(settings: Settings) -> dict[str, Any]:
    return {f.name: getattr(settings, f.name) for f in fields(settings)}


def defaults() -> dict[str, Any]:
    return {f.name: f.default for f in fields(Settings)}
