"""The composition root: the one place concrete adapters are chosen and wired together.

`build_components` makes a process's ordered list of components
(`service/components.py`) for its roles (`process.run_service` runs them), each
stopping in its own phase:

1. On SIGINT/SIGTERM the pool and recovery stop claiming, retention stops after its
   current batch, and `/readyz` turns 503.
2. HTTP keeps serving for DRAIN_DELAY (load balancers notice), then stops accepting
   connections and finishes the requests in flight.
3. Running jobs get SHUTDOWN_TIMEOUT (counted from the signal) to finish; then the pool
   cancels them and releases their jobs, giving the attempt back.
4. The METRICS_ADDR listener (`/metrics` and the probes, for `jobqueue worker`) and the
   queue-depth refresher stop once everything else has returned, so the last counters
   can still be scraped; the wake-up notifier sends what it still owes (the API has
   stopped, so nothing more comes), and the wake-up listener closes.
5. The process exits 0 once every component has returned. A component returning early
   shuts the process down the same way and is reported. A second signal cancels all of
   that and exits 130 at once.

A process imports only what its components need: Litestar and uvicorn when it serves
HTTP (the API or METRICS_ADDR), Alembic when it migrates, the OpenTelemetry SDK when
tracing is on. Handler modules are loaded by `handler_modules.py`, the database comes
from `provisioning.py`.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING
from uuid import uuid4

from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.payloads import MsgspecPayloadDecoder
from jobqueue.adapters.postgres.endings import EndingWatch
from jobqueue.adapters.postgres.job_types import PostgresJobTypes
from jobqueue.adapters.postgres.notify import (
    Notifier,
    pg_notify,
)
from jobqueue.adapters.postgres.processes import PostgresProcesses
from jobqueue.adapters.postgres.rollup import PostgresRollup
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.adapters.postgres.transactions import PostgresTransactions
from jobqueue.domain.periodic import PeriodicJob, Schedule
from jobqueue.domain.ports import JobStore, ProcessRegistry, ThroughputRollup
from jobqueue.domain.processes import ProcessInfo
from jobqueue.domain.registry import Registry
from jobqueue.domain.throughput import Tallies
from jobqueue.entrypoints.config.settings import Settings
from jobqueue.entrypoints.service.components import (
    Component,
    Loop,
    OnStop,
    StopPhase,
)
from jobqueue.entrypoints.service.liveness import Heartbeat, QueueWatch
from jobqueue.entrypoints.service.published_types import Published, TypeCatalogue, TypePublisher
from jobqueue.entrypoints.service.queue_limits import (
    AfterDeclaration,
    LimitsDeclaration,
    declared_limits,
)
from jobqueue.entrypoints.service.runtime import Listeners
from jobqueue.entrypoints.service.wakeups import Announcing, announcer, listening, waking
from jobqueue.entrypoints.worker.lease_recovery import LeaseRecovery
from jobqueue.entrypoints.worker.observer import observing
from jobqueue.entrypoints.worker.pauses import QueuePauses
from jobqueue.entrypoints.worker.periodic_scheduler import PeriodicScheduler
from jobqueue.entrypoints.worker.pool import WorkerPool
from jobqueue.entrypoints.worker.pool_config import PoolConfig, pool_configs
from jobqueue.entrypoints.worker.retention import RetentionLoop
from jobqueue.entrypoints.worker.throughput import Counting, RollupFlusher
from jobqueue.release import package_version

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from jobqueue.adapters.telemetry.job_spans import JobSpans
    from jobqueue.adapters.telemetry.metrics import Metrics
    from jobqueue.entrypoints.http.app import HttpConfig

__all__ = ["Roles", "build_components", "http_config"]

_log = logging.getLogger("jobqueue")


@dataclass(frozen=True, slots=True)
class Roles:
    http: bool
    workers: bool

    @property
    def name(self) -> str:
        return {(True, True): "serve", (True, False): "api", (False, True): "worker"}[
            (self.http, self.workers)
        ]


def _schedules(registry: Registry) -> list[tuple[PeriodicJob, Schedule]]:
    """The registry's periodic jobs with their cron schedules. Raises `ValueError` for an
    expression that is none."""
    if not registry.periodic_jobs():
        return []
    # Imported only when there is a schedule to read: croniter (and dateutil) would be
    # start-up work for every process otherwise.
    from jobqueue.adapters.cron import schedules

    return schedules(registry)


def build_components(
    settings: Settings,
    roles: Roles,
    registry: Registry,
    engine: AsyncEngine,
    listeners: Listeners,
    tracer_provider: TracerProvider | None,
) -> list[Component]:
    """Every component of the process, in the order they start (and are reported in).

    A new background component is a class satisfying `Component` (or an object with
    `run` and `stop`, wrapped in a `Loop`) added here, with the phase it stops in.
    """
    store = PostgresJobStore(engine)
    serves_http = listeners.api is not None or listeners.metrics is not None
    # Counted only where /metrics can be read: a worker with METRICS_ADDR=off spends
    # neither the import nor the per-job work on numbers nobody can scrape.
    metrics = _metrics() if serves_http else None
    decoder = MsgspecPayloadDecoder()
    processes = PostgresProcesses(engine)
    # Written by worker processes, charted by the API's dashboard.
    rollup = PostgresRollup(engine)
    periodic = _schedules(registry)
    components: list[Component] = []
    # One pool per queue consumed, each with its own concurrency, claims and prefetch.
    pools: list[WorkerPool] = []
    pauses: QueuePauses | None = None
    if roles.workers:
        tracer = _job_spans(tracer_provider)
        # Counted for the dashboard's charts whatever METRICS_ADDR says: in memory, added
        # to the rollup every few seconds and at the end (after the pools have returned).
        tallies = Tallies()
        observer = observing(metrics, Counting(tallies))
        configs = pool_configs(settings)
        limits = declared_limits(
            registry.queue_limits, settings.queue_limits, [config.queue for config in configs]
        )
        declaration = LimitsDeclaration(store, limits)
        # Handlers' own transactions (`ctx.transaction()`), on the jobs' database.
        transactions = PostgresTransactions(engine)
        for config in configs:
            pool = WorkerPool(
                store,
                registry,
                decoder,
                config,
                observer=observer,
                tracer=tracer,
                transactions=transactions,
            )
            claiming = AfterDeclaration(pool, declaration)
            components.append(Loop(f"worker pool ({config.queue})", StopPhase.SIGNAL, claiming))
            pools.append(pool)
        pauses = QueuePauses(store, {pool.queue: pool for pool in pools})
        components.append(Loop("queue pauses", StopPhase.SIGNAL, pauses))
        components.append(Loop("queue limits", StopPhase.SIGNAL, declaration))
        # So that API processes without this code accept these types.
        publisher = TypePublisher(PostgresJobTypes(engine), registry, decoder, store.worker)
        components.append(Loop("job types publisher", StopPhase.SIGNAL, publisher))
        if periodic:
            scheduler = PeriodicScheduler(
                store,
                registry,
                periodic,
                default_max_attempts=settings.max_attempts,
                on_due=waking(pools),
            )
            components.append(Loop("periodic jobs", StopPhase.SIGNAL, scheduler))
        # So that GET /queues can tell a queue nobody consumes from a busy one.
        heartbeat = Heartbeat(
            processes,
            _describing(registry, pool_configs(settings), pools),
            settings.lease_duration,
        )
        components.append(Loop("process heartbeat", StopPhase.SIGNAL, heartbeat))
        recovery = LeaseRecovery(store, settings.recovery_interval, observer=observer)
        components.append(Loop("lease recovery", StopPhase.SIGNAL, recovery))
        # Always: with jobs kept forever, the rollup's old rows still go.
        retention = RetentionLoop(
            store,
            settings.retention_policy(),
            settings.retention_interval,
            on_pruned=None if metrics is None else metrics.jobs_pruned,
            rollup=rollup,
        )
        components.append(Loop("retention", StopPhase.SIGNAL, retention))
        # Stopped last: its final flush comes after the pools' last attempts ended.
        components.append(Loop("rollup flush", StopPhase.LAST, RollupFlusher(tallies, rollup)))
    # Every role watches: an API with no worker anywhere is where jobs wait unseen.
    components.append(Loop("queue watch", StopPhase.SIGNAL, QueueWatch(processes)))
    # Wake-ups across processes: the API side announces new jobs, workers listen.
    notifier = Notifier(pg_notify(engine)) if roles.http and settings.notify else None
    # Waits for jobs' ends (`GET /jobs/{id}/wait`), woken by the listener below; without
    # it they read their job every POLL_INTERVAL.
    waits = EndingWatch(store, recheck=settings.poll_interval) if listeners.api else None
    if metrics is not None:
        from jobqueue.adapters.postgres.stats import PostgresQueueStats
        from jobqueue.adapters.telemetry.metrics import QueueDepthRefresher

        types = _catalogue(registry, decoder, engine) if listeners.api is not None else None
        if types is not None:
            # Kept current while the API serves: stopped last, like the listener.
            components.append(Loop("job types", StopPhase.LAST, types))
        components += _http_components(
            http_config(settings),
            listeners,
            store=store,
            registry=registry,
            types=types,
            periodic=periodic,
            decoder=decoder,
            metrics=metrics,
            on_enqueued=announcer(waking(pools), notifier),
            tracer_provider=tracer_provider,
            processes=processes,
            rollup=rollup,
            waits=waits,
        )
        # Kept current where /metrics is served; refreshed from a loop, never a scrape.
        depth = QueueDepthRefresher(PostgresQueueStats(engine), metrics)
        components.append(Loop("queue depth", StopPhase.LAST, depth))
    if notifier is not None:
        components.append(Announcing(notifier))
    if settings.notify:
        components += listening(_url_of(engine), pools, pauses, waits)
    return components


def _catalogue(
    registry: Registry, decoder: MsgspecPayloadDecoder, engine: AsyncEngine
) -> TypeCatalogue:
    """The types the API accepts: its own, then those workers published. `jsonschema`
    is imported here, by processes serving the API only."""
    from jobqueue.adapters.payload_schemas import JsonSchemaCompiler

    return TypeCatalogue(
        registry, decoder, Published(PostgresJobTypes(engine), JsonSchemaCompiler())
    )


def _describing(
    registry: Registry, configs: Sequence[PoolConfig], pools: Sequence[WorkerPool]
) -> Callable[[], ProcessInfo]:
    """What this worker process's heartbeats say of it: fixed at start but for the
    attempts running."""
    started = ProcessInfo(
        id=uuid4(),
        host=socket.gethostname(),
        pid=os.getpid(),
        version=package_version(),
        queues=tuple(config.queue for config in configs),
        types=tuple(registry),
        concurrency=sum(config.workers for config in configs),
        running=0,
        queue_concurrency=tuple(config.workers for config in configs),
    )

    def describe() -> ProcessInfo:
        return replace(started, running=sum(pool.in_flight for pool in pools))

    return describe


def _metrics() -> Metrics:
    from jobqueue.adapters.telemetry.metrics import Metrics

    return Metrics()


def http_config(settings: Settings) -> HttpConfig:
    """What the HTTP side reads of `settings`: built here only."""
    from jobqueue.entrypoints.http.app import HttpConfig

    return HttpConfig(
        max_body_bytes=settings.max_body_bytes,
        api_tokens=settings.api_tokens,
        default_max_attempts=settings.max_attempts,
        # Requests still running when the listener closed get as long as jobs do.
        graceful_timeout=settings.shutdown_timeout,
        read_timeout=settings.http_read_timeout,
        max_connections=settings.http_max_connections,
        read_only=settings.dashboard_read_only,
        trace_url=settings.trace_url,
    )


def _http_components(
    config: HttpConfig,
    listeners: Listeners,
    *,
    store: JobStore,
    registry: Registry,
    types: TypeCatalogue | None,
    periodic: list[tuple[PeriodicJob, Schedule]],
    decoder: MsgspecPayloadDecoder,
    metrics: Metrics,
    on_enqueued: Callable[[], None] | None,
    tracer_provider: TracerProvider | None,
    processes: ProcessRegistry,
    rollup: ThroughputRollup,
    waits: EndingWatch | None,
) -> list[Component]:
    """The HTTP servers on the bound listeners, and `/readyz` turning 503 at the signal.
    Litestar and uvicorn are imported here, by processes serving HTTP only."""
    from jobqueue.entrypoints.http.app import create_app
    from jobqueue.entrypoints.http.health import Readiness
    from jobqueue.entrypoints.http.ops import create_ops_app
    from jobqueue.entrypoints.http.server import HttpServer

    readiness = Readiness(store)
    components: list[Component] = [OnStop("readiness", StopPhase.SIGNAL, readiness.drain)]
    if listeners.api is not None:
        app = create_app(
            config,
            store=store,
            registry=registry,
            decoder=decoder,
            metrics=metrics,
            readiness=readiness,
            on_enqueued=on_enqueued,
            tracer_provider=tracer_provider,
            types=types,
            periodic=periodic,
            processes=processes,
            rollup=rollup,
            waits=waits,
        )
        components.append(HttpServer("http", StopPhase.DRAINED, app, listeners.api, config))
        if waits is not None:
            # At the signal, so that long polls answer before the listener closes.
            components.append(OnStop("waits", StopPhase.SIGNAL, waits.close))
    if listeners.metrics is not None:
        ops = create_ops_app(metrics=metrics, readiness=readiness)
        # Last, so the counters of the final attempts stay scrapeable while the pool
        # drains and the probes keep answering (/readyz with 503).
        components.append(
            HttpServer(
                "metrics server",
                StopPhase.LAST,
                ops,
                listeners.metrics,
                config,
            )
        )
    return components


def _job_spans(tracer_provider: TracerProvider | None) -> JobSpans | None:
    if tracer_provider is None:
        return None
    from jobqueue.adapters.telemetry.job_spans import JobSpans

    return JobSpans(tracer_provider)


def _url_of(engine: AsyncEngine) -> str:
    return engine.url.render_as_string(hide_password=False)
