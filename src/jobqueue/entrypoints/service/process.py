"""One process of the service: any mix of the HTTP API and the workers (pool, lease
recovery, retention) in one event loop, until a signal. It binds its listeners, starts
tracing, gets its database (`provisioning.py`), migrates it or checks its schema,
builds its components (`compose.build_components`) and runs them
(`components.run_components`)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.limits import Limits
from jobqueue.adapters.postgres.schema_version import is_current
from jobqueue.adapters.telemetry.tracing_config import TracingConfig
from jobqueue.domain.registry import Registry
from jobqueue.entrypoints.config.listeners import api_listener, metrics_listener
from jobqueue.entrypoints.config.settings import Settings
from jobqueue.entrypoints.service import exit_codes
from jobqueue.entrypoints.service.components import run_components
from jobqueue.entrypoints.service.compose import Roles, build_components
from jobqueue.entrypoints.service.handler_modules import build_registry
from jobqueue.entrypoints.service.heap import settle_after_start
from jobqueue.entrypoints.service.provisioning import (
    database,
    migrate,
    warn_unless_statements_bounded,
)
from jobqueue.entrypoints.service.runtime import (
    Signals,
    bind_listeners,
    installed,
    warn_if_open,
)
from jobqueue.entrypoints.worker.pool_config import concurrency

if TYPE_CHECKING:
    from jobqueue.adapters.telemetry.tracing import Tracing

_log = logging.getLogger("jobqueue")


async def run_service(settings: Settings, roles: Roles) -> int:
    """Run until a signal; return the exit code. Raises `StartupError`."""
    async with installed(Signals()) as signals:
        try:
            return await _run_service(settings, roles, signals)
        except asyncio.CancelledError:
            if signals.forced:
                return exit_codes.FORCED
            raise


async def _run_service(settings: Settings, roles: Roles, signals: Signals) -> int:
    registry = build_registry(settings)
    api_address = api_listener(settings, with_workers=roles.workers) if roles.http else None
    listeners = bind_listeners(api_address, metrics_listener(settings, serves_api=roles.http))
    if api_address is not None:
        warn_if_open(api_address, settings.api_tokens)
    tracing = _start_tracing(settings.tracing)
    tracer_provider = tracing.provider if tracing is not None else None
    try:
        async with database(settings) as url:
            if settings.auto_migrate:
                await migrate(url, unless_current=True)
            elif not await is_current(url):
                # Not refused: during a rolling deploy the new code may start first, and
                # it works on the older schema, but its claims may lack their index.
                _log.warning(
                    "the database schema is not at this version's migrations; run "
                    "`jobqueue migrate` (or set AUTO_MIGRATE=true): until then some "
                    "statements may not find the indexes they were written for"
                )
            engine = create_engine(
                url,
                pool_size=min(max(10, sum(concurrency(settings).values())), 50),
                limits=Limits(
                    statement=settings.statement_timeout, client=settings.db_client_timeout
                ),
                pooler=settings.database_pooler,
            )
            if not settings.database_pooler.keeps_sessions:
                await warn_unless_statements_bounded(engine, settings)
            if tracer_provider is not None:
                from jobqueue.adapters.telemetry.tracing import trace_engine

                trace_engine(engine, tracer_provider)
            try:
                components = build_components(
                    settings, roles, registry, engine, listeners, tracer_provider
                )
                _log_running(settings, roles, registry)
                settle_after_start()
                await run_components(components, signals, drain_delay=settings.drain_delay)
            finally:
                await asyncio.shield(engine.dispose())
    finally:
        listeners.close()
        if tracing is not None:
            # Last, so the spans of the final attempts and requests are exported too.
            await asyncio.shield(asyncio.to_thread(tracing.shutdown))
    _log.info("stopped")
    return exit_codes.OK


def _start_tracing(config: TracingConfig) -> Tracing | None:
    """The process's tracing, or None when it is off (the SDK is then not even imported).

    Installed globally: handlers using the OpenTelemetry API themselves find this
    provider, so their spans join the attempt's trace; jobqueue's own components are
    handed it explicitly.
    """
    if not config.enabled:
        return None
    from jobqueue.adapters.telemetry.tracing import start_tracing

    tracing = start_tracing(config)
    tracing.make_global()
    return tracing


def _log_running(settings: Settings, roles: Roles, registry: Registry) -> None:
    metrics_addr = metrics_listener(settings, serves_api=roles.http)
    _log.info(
        "jobqueue %s running",
        roles.name,
        extra={
            "http_addr": (
                str(api_listener(settings, with_workers=roles.workers)) if roles.http else None
            ),
            "metrics_addr": str(metrics_addr) if metrics_addr is not None else None,
            "workers": settings.workers if roles.workers else 0,
            "job_types": list(registry),
        },
    )


# --- the components ----------------------------------------------------------------------
