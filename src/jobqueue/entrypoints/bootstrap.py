"""The composition root: the one place concrete adapters are chosen and wired together.

`run_service` runs any mix of the HTTP API and the workers (pool, lease recovery and
retention) in one event loop, and owns the shutdown sequence:

1. On SIGINT/SIGTERM the pool and recovery stop claiming, retention stops after its
   current batch, and `/readyz` turns 503.
2. HTTP keeps serving for DRAIN_DELAY (load balancers notice), then stops accepting
   connections and finishes the requests in flight.
3. Running jobs get SHUTDOWN_TIMEOUT (counted from the signal) to finish; then the pool
   cancels them and releases their jobs, giving the attempt back.
4. The METRICS_ADDR listener (`/metrics` and the probes, for `jobqueue worker`) stops
   once everything else has returned, so the last counters can still be scraped.
5. The process exits 0 once every worker has returned. A second signal cancels all of
   that and exits 130 at once.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import socket
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import uvicorn
from opentelemetry.trace import TracerProvider
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.handlers import builtin_registry
from jobqueue.adapters.payloads import MsgspecPayloadDecoder
from jobqueue.adapters.postgres.database import create_engine, redact
from jobqueue.adapters.postgres.embedded import start_embedded
from jobqueue.adapters.postgres.migrations import upgrade
from jobqueue.adapters.postgres.notify import Listener, Notifier, asyncpg_connect, pg_notify
from jobqueue.adapters.postgres.stats import PostgresQueueStats
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.adapters.telemetry.job_spans import JobSpans
from jobqueue.adapters.telemetry.metrics import Metrics, QueueDepthRefresher
from jobqueue.adapters.telemetry.tracing import start_tracing, trace_engine
from jobqueue.domain.errors import JobQueueError
from jobqueue.domain.job import Job
from jobqueue.domain.registry import Registry
from jobqueue.entrypoints import exit_codes
from jobqueue.entrypoints.config import HttpAddress, Settings
from jobqueue.entrypoints.http.app import create_app
from jobqueue.entrypoints.http.health import Readiness
from jobqueue.entrypoints.http.ops import create_ops_app
from jobqueue.entrypoints.runtime import (
    Signals,
    StartupError,
    bind,
    http_server,
    installed,
    serve_http,
)
from jobqueue.entrypoints.worker.maintenance import LeaseRecovery
from jobqueue.entrypoints.worker.pool import WorkerPool
from jobqueue.entrypoints.worker.retention import RetentionLoop

_log = logging.getLogger("jobqueue")

# Component names of the metrics listener's tasks, which stop after all the others.
_METRICS_SERVER = "metrics server"
_QUEUE_DEPTH = "queue depth"
_OPS_TASKS = frozenset({_METRICS_SERVER, _QUEUE_DEPTH})


# --- handlers --------------------------------------------------------------------------


def build_registry(settings: Settings) -> Registry:
    """The built-in handlers plus the `registry` of every configured handler module."""
    registry = builtin_registry(webhook_allow_private=settings.webhook_allow_private)
    for module_name in settings.handler_modules:
        try:
            registry.include(load_handlers(module_name))
        except ValueError as error:
            raise StartupError(f"handler module {module_name!r}: {error}") from None
    return registry


def load_handlers(module_name: str) -> Registry:
    """The module-level `registry` of `module_name`, importable from the working directory
    like the application's own code."""
    _make_working_directory_importable()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        missing = error.name or ""
        # Only the module itself (or a package on its path) missing means "not found";
        # a dependency it imports being absent is a failure inside the module.
        if module_name == missing or module_name.startswith(missing + "."):
            raise StartupError(
                f"handler module {module_name!r} was not found (is its package installed, "
                "or on PYTHONPATH?)"
            ) from None
        raise StartupError(f"handler module {module_name!r} failed to import: {error}") from error
    except Exception as error:
        raise StartupError(
            f"handler module {module_name!r} failed to import: {type(error).__name__}: {error}"
        ) from error
    registry = getattr(module, "registry", None)
    if not isinstance(registry, Registry):
        found = "nothing" if registry is None else f"a {type(registry).__name__}"
        raise StartupError(
            f"handler module {module_name!r} must define `registry = Registry()` at module "
            f"level (jobqueue.Registry), but `registry` is {found}"
        )
    return registry


def _make_working_directory_importable() -> None:
    # A console script's sys.path starts with its bin/ directory, not the working
    # directory; uvicorn resolves `module:app` from the working directory too. Kept for
    # the process's life: a handler module may import its siblings lazily.
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())


# --- database ----------------------------------------------------------------------------


@asynccontextmanager
async def database(settings: Settings) -> AsyncIterator[str]:
    """The database URL to use: DATABASE_URL, else an embedded server, stopped on exit."""
    if settings.database_url is not None:
        _log.info(
            "using the database from DATABASE_URL",
            extra={"database": redact_url(settings.database_url)},
        )
        yield settings.database_url
        return
    try:
        embedded = await asyncio.to_thread(start_embedded, settings.data_dir)
    except JobQueueError as error:
        raise StartupError(str(error)) from None
    _log.info(
        "using the embedded PostgreSQL (DATABASE_URL is not set)",
        extra={"database": redact_url(embedded.url), "data_dir": str(embedded.data_dir)},
    )
    try:
        yield embedded.url
    finally:
        # Shielded: this must run to the end even when a second signal cancelled the rest.
        await asyncio.shield(asyncio.to_thread(embedded.stop))
        _log.info("left the embedded PostgreSQL", extra={"data_dir": str(embedded.data_dir)})


def redact_url(url: str) -> str:
    try:
        return redact(url)
    except Exception:
        return "<unparsable URL>"


async def migrate(url: str) -> None:
    _log.info("applying database migrations")
    try:
        # Alembic runs its own event loop, so it gets a thread; an advisory lock in the
        # migration environment makes concurrent starters take turns.
        await asyncio.to_thread(upgrade, url)
    except Exception as error:
        raise StartupError(
            f"migrating the database failed: {type(error).__name__}: {error}"
        ) from error
    _log.info("database schema is up to date")


async def run_migrate(settings: Settings) -> int:
    # Not graceful: a migration cannot be drained. Cancelling still leaves the embedded
    # server behind us stopped, and Alembic's transaction rolls back.
    async with installed(Signals(graceful=False)) as signals:
        try:
            async with database(settings) as url:
                await migrate(url)
        except asyncio.CancelledError:
            if signals.forced:
                return exit_codes.FORCED
            raise
    return exit_codes.OK


# --- the service ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Roles:
    http: bool
    workers: bool

    @property
    def name(self) -> str:
        return {(True, True): "serve", (True, False): "api", (False, True): "worker"}[
            (self.http, self.workers)
        ]


async def run_service(settings: Settings, roles: Roles) -> int:
    """Run until a signal; return the exit code. Raises `StartupError`."""
    async with installed(Signals()) as signals:
        try:
            return await _run_service(settings, roles, signals)
        except asyncio.CancelledError:
            if signals.forced:
                return exit_codes.FORCED
            raise


@dataclass(frozen=True, slots=True)
class Listeners:
    """The bound sockets of the process: the API's on HTTP_ADDR, the metrics server's
    on METRICS_ADDR; either may be absent."""

    api: socket.socket | None
    metrics: socket.socket | None

    def close(self) -> None:
        for sock in (self.api, self.metrics):
            if sock is not None:
                sock.close()


def bind_listeners(settings: Settings, roles: Roles) -> Listeners:
    """Bind every port first, so a taken one stops the process before anything starts."""
    api = bind(settings.http_addr) if roles.http else None
    metrics_addr = settings.metrics_listener(serves_api=roles.http)
    if metrics_addr is None:
        return Listeners(api, None)
    try:
        if roles.http and _same_port(metrics_addr, settings.http_addr):
            raise StartupError(
                f"METRICS_ADDR {metrics_addr} is the port of HTTP_ADDR {settings.http_addr}, "
                "which serves /metrics already; choose another port, or unset METRICS_ADDR"
            )
        return Listeners(api, bind(metrics_addr, "METRICS_ADDR"))
    except StartupError:
        if api is not None:
            api.close()
        raise


def _same_port(one: HttpAddress, other: HttpAddress) -> bool:
    # Both sockets are bound before either listens, and Linux lets SO_REUSEADDR sockets
    # share a port until then: the clash would surface later, inside uvicorn.
    wildcards = {"0.0.0.0", "::"}
    hosts_overlap = one.host == other.host or bool({one.host, other.host} & wildcards)
    return one.port == other.port and hosts_overlap


async def _run_service(settings: Settings, roles: Roles, signals: Signals) -> int:
    registry = build_registry(settings)
    listeners = bind_listeners(settings, roles)
    tracing = start_tracing(settings.tracing)
    # Handlers using the OpenTelemetry API themselves find this provider, so their spans
    # join the attempt's trace; jobqueue's own components are handed it explicitly.
    tracing.make_global()
    try:
        async with database(settings) as url:
            if settings.auto_migrate:
                await migrate(url)
            engine = create_engine(url, pool_size=min(max(10, settings.workers), 50))
            if tracing.provider is not None:
                trace_engine(engine, tracing.provider)
            try:
                await _run_components(
                    settings, roles, registry, engine, listeners, signals, tracing.provider
                )
            finally:
                await asyncio.shield(engine.dispose())
    finally:
        listeners.close()
        # Last, so the spans of the final attempts and requests are exported too.
        await asyncio.shield(asyncio.to_thread(tracing.shutdown))
    _log.info("stopped")
    return exit_codes.OK


async def _run_components(
    settings: Settings,
    roles: Roles,
    registry: Registry,
    engine: AsyncEngine,
    listeners: Listeners,
    signals: Signals,
    tracer_provider: TracerProvider | None,
) -> None:
    store = PostgresJobStore(engine)
    decoder = MsgspecPayloadDecoder()
    metrics = Metrics()
    readiness = Readiness(store)
    pool: WorkerPool | None = None
    recovery: LeaseRecovery | None = None
    retention: RetentionLoop | None = None
    server: uvicorn.Server | None = None
    metrics_server: uvicorn.Server | None = None
    queue_depth: QueueDepthRefresher | None = None
    tasks: dict[str, asyncio.Task[None]] = {}
    # Wake-ups across processes: the API side announces new jobs, workers listen.
    notifier = Notifier(pg_notify(engine)) if roles.http and settings.notify else None
    listener: Listener | None = None

    def start(name: str, work: Coroutine[Any, Any, None]) -> None:
        tasks[name] = asyncio.create_task(work, name=f"jobqueue {name}")

    if roles.workers:
        pool = WorkerPool(
            store,
            registry,
            decoder,
            settings.pool_config(),
            observer=metrics,
            tracer=JobSpans(tracer_provider) if tracer_provider is not None else None,
        )
        recovery = LeaseRecovery(store, settings.recovery_interval, observer=metrics)
        if settings.notify:
            listener = Listener(asyncpg_connect(_url_of(engine)), pool.wake)
        start("worker pool", pool.run())
        start("lease recovery", recovery.run())
        policy = settings.retention_policy()
        if policy.ages:
            retention = RetentionLoop(
                store, policy, settings.retention_interval, on_pruned=metrics.jobs_pruned
            )
            start("retention", retention.run())
    if roles.http and listeners.api is not None:
        app = create_app(
            settings,
            store=store,
            registry=registry,
            decoder=decoder,
            metrics=metrics,
            readiness=readiness,
            queue_depth=PostgresQueueStats(engine),
            on_enqueued=_announcer(pool, notifier),
            tracer_provider=tracer_provider,
        )
        server = http_server(app, settings)
        start("http", serve_http(server, listeners.api))
    metrics_addr = settings.metrics_listener(serves_api=roles.http)
    if listeners.metrics is not None:
        metrics_server = http_server(create_ops_app(metrics=metrics, readiness=readiness), settings)
        start(_METRICS_SERVER, serve_http(metrics_server, listeners.metrics))
        if not roles.http:
            # The API refreshes the gauge where it runs; a worker-only deployment (jobs
            # enqueued in-process) would have none without this.
            queue_depth = QueueDepthRefresher(PostgresQueueStats(engine), metrics)
            start(_QUEUE_DEPTH, queue_depth.run())
    _log.info(
        "jobqueue %s running",
        roles.name,
        extra={
            "http_addr": str(settings.http_addr) if roles.http else None,
            "metrics_addr": str(metrics_addr) if metrics_addr is not None else None,
            "workers": settings.workers if roles.workers else 0,
            "job_types": list(registry),
        },
    )
    try:
        if listener is not None:
            listener.start()
        if notifier is not None:
            notifier.start()
        ended = await _until_signal_or_exit(signals, tasks)
        if ended is not None:
            _log.error("%s stopped unexpectedly; shutting down", ended)
        readiness.drain()
        if pool is not None:
            pool.stop()
        if recovery is not None:
            recovery.stop()
        if retention is not None:
            retention.stop()
        if server is not None:
            delay = settings.drain_delay.total_seconds()
            if delay > 0 and not tasks["http"].done():
                _log.info("draining: still serving HTTP for %gs", delay)
                await asyncio.sleep(delay)
            server.should_exit = True
        if metrics_server is not None:
            # Last, so the counters of the final attempts stay scrapeable while the pool
            # drains and the probes keep answering (/readyz with 503).
            others = [task for name, task in tasks.items() if name not in _OPS_TASKS]
            if others:
                await asyncio.wait(others)
            if queue_depth is not None:
                queue_depth.stop()
            metrics_server.should_exit = True
        await asyncio.wait(tasks.values())
    finally:
        for task in tasks.values():
            task.cancel()
        await asyncio.gather(*tasks.values(), return_exceptions=True)
        # After HTTP has stopped, so the last submissions are announced too (unless forced).
        if notifier is not None:
            await notifier.aclose(flush=not signals.forced)
        if listener is not None:
            await listener.aclose()
    failures = [task.exception() for task in tasks.values() if not task.cancelled()]
    for failure in failures:
        if isinstance(failure, StartupError):
            raise failure
        if failure is not None:
            raise StartupError(f"a component failed: {type(failure).__name__}: {failure}")


async def _until_signal_or_exit(
    signals: Signals, tasks: dict[str, asyncio.Task[None]]
) -> str | None:
    """Wait for the first signal; return the name of a component that ended before it."""
    signalled = asyncio.create_task(signals.requested.wait())
    try:
        done, _ = await asyncio.wait(
            [signalled, *tasks.values()], return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        signalled.cancel()
    for name, task in tasks.items():
        if task in done:
            return name
    return None


def _announcer(pool: WorkerPool | None, notifier: Notifier | None) -> Callable[[Job], None] | None:
    """What a submission calls: this process's pool is woken directly, the others
    through the notifier (which `serve` runs too, for the other replicas)."""
    wakes: list[Callable[[], None]] = []
    if pool is not None:
        wakes.append(pool.wake)
    if notifier is not None:
        wakes.append(notifier.job_available)
    if not wakes:
        return None

    def announce(job: Job) -> None:
        for wake in wakes:
            wake()

    return announce


def _url_of(engine: AsyncEngine) -> str:
    return engine.url.render_as_string(hide_password=False)
