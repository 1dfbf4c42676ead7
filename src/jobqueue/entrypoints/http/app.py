"""`create_app`: the Litestar application, built from its configuration and ready adapters.

Nothing is created at import time; every call builds an independent app, so tests can
run several in one process. What the app is given is declared here (`HttpConfig`,
`HttpMetrics`); the composition root builds them, in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from litestar import Litestar, Router
from litestar.openapi import OpenAPIConfig
from litestar.openapi.spec import Components, SecurityScheme
from litestar.types import ControllerRouterHandler
from opentelemetry.trace import TracerProvider

from jobqueue.adapters.postgres.endings import EndingWatch
from jobqueue.domain.periodic import PeriodicJob, Schedule
from jobqueue.domain.ports import JobStore, PayloadDecoder, ProcessRegistry, ThroughputRollup
from jobqueue.domain.registry import Registry
from jobqueue.entrypoints.http.errors import exception_handlers
from jobqueue.entrypoints.http.guards import BearerTokenGuard, refuse_unsafe_writes
from jobqueue.entrypoints.http.health import (
    OPERATIONS,
    Exposition,
    Readiness,
    constant,
    operations_dependencies,
)
from jobqueue.entrypoints.http.middleware import RequestContextMiddleware
from jobqueue.entrypoints.http.openapi import DOCS_PATH, complete, docs_assets, docs_page
from jobqueue.entrypoints.http.openapi_types import TypedDocument
from jobqueue.entrypoints.http.periodic_routes import PeriodicController, Schedules
from jobqueue.entrypoints.http.queue_routes import QueuesController
from jobqueue.entrypoints.http.routes import JobsController
from jobqueue.entrypoints.http.service import JobService, QueueService, SubmissionMetrics
from jobqueue.entrypoints.http.tracing import traced
from jobqueue.entrypoints.http.type_routes import TypesController
from jobqueue.entrypoints.http.ui.bulk import BulkController
from jobqueue.entrypoints.http.ui.errors import html_on_dashboard_paths
from jobqueue.entrypoints.http.ui.frame import DashboardAccess
from jobqueue.entrypoints.http.ui.job_routes import JobPageController
from jobqueue.entrypoints.http.ui.jobs import JobsPageController
from jobqueue.entrypoints.http.ui.pages import DashboardController, static_assets, template_config
from jobqueue.entrypoints.http.ui.queues import QueuePagesController
from jobqueue.entrypoints.http.ui.registry_pages import RegistryPagesController
from jobqueue.entrypoints.http.ui.sign_in import SignInController
from jobqueue.entrypoints.http.ui.throughput import ThroughputCharts
from jobqueue.entrypoints.http.ui.workflow_routes import WorkflowPageController
from jobqueue.entrypoints.http.worker_routes import Workers, WorkersController
from jobqueue.entrypoints.http.workflow_routes import WorkflowsController
from jobqueue.entrypoints.service.published_types import TypeCatalogue
from jobqueue.release import package_version

Lifespan = Callable[[Litestar], AbstractAsyncContextManager[None]]

_BEARER = "bearerAuth"


@dataclass(frozen=True, slots=True)
class HttpConfig:
    """What the HTTP side reads of the configuration."""

    max_body_bytes: int
    # Bearer tokens every route but the open ones (`PUBLIC`) requires; empty: none.
    api_tokens: frozenset[str]
    # The attempt budget of a submission that names none.
    default_max_attempts: int
    # How long requests still running when a listener closes get to finish.
    graceful_timeout: timedelta
    # How long a request may take to arrive whole; connections per listener.
    read_timeout: timedelta
    max_connections: int
    # The dashboard shows everything and refuses every action.
    read_only: bool = False
    # A trace's page in the operator's tracing UI, `{trace_id}` in it (TRACE_URL).
    trace_url: str | None = None


class HttpMetrics(SubmissionMetrics, Exposition, Protocol):
    """The API's metrics: it counts submissions in them and serves them at /metrics
    (`adapters.telemetry.metrics.Metrics` is one)."""


def create_app(
    config: HttpConfig,
    *,
    store: JobStore,
    registry: Registry,
    decoder: PayloadDecoder,
    metrics: HttpMetrics,
    readiness: Readiness | None = None,
    on_enqueued: Callable[[], None] | None = None,
    lifespan: Sequence[Lifespan] = (),
    tracer_provider: TracerProvider | None = None,
    types: TypeCatalogue | None = None,
    periodic: Sequence[tuple[PeriodicJob, Schedule]] | None = None,
    processes: ProcessRegistry | None = None,
    rollup: ThroughputRollup | None = None,
    waits: EndingWatch | None = None,
) -> Litestar:
    """The HTTP API over `store`.

    `readiness` is shared with whoever runs the shutdown (it flips `/readyz` to 503);
    `on_enqueued` is told about every job that became pending (a local pool's `wake`);
    `lifespan` adds context managers entered at startup;
    `tracer_provider`, when given, traces every request but the probes (none otherwise);
    `types` are the job types it accepts (default: `registry`'s only);
    `periodic` the periodic jobs it lists (default: `registry`'s, read here);
    `processes` the registry `/workers` lists (no such route without one);
    `rollup` what the overview's charts read (no charts without one);
    `waits` what a wait for a job's end waits on (default: one that reads the job every
    second, for an app with no listener).
    """
    if periodic is None:
        # Imported only when asked: croniter is start-up work.
        from jobqueue.adapters.cron import schedules

        periodic = schedules(registry) if registry.periodic_jobs() else []
    types = types if types is not None else TypeCatalogue(registry, decoder)
    readiness = readiness if readiness is not None else Readiness(store)
    service = JobService(
        store,
        types,
        decoder,
        metrics,
        default_max_attempts=config.default_max_attempts,
        on_enqueued=on_enqueued,
        waits=waits if waits is not None else EndingWatch(store, recheck=timedelta(seconds=1)),
    )
    resources: list[ControllerRouterHandler] = [
        JobsController,
        WorkflowsController,
        QueuesController,
        PeriodicController,
        TypesController,
        *([WorkersController] if processes is not None else []),
    ]
    components = Components()
    if config.api_tokens:
        # A router only to attach the security requirement to the resources in the
        # OpenAPI document; the guard enforces it everywhere but on the open probes.
        resources = [Router(path="/", route_handlers=resources, security=[{_BEARER: []}])]
        components = Components(
            security_schemes={_BEARER: SecurityScheme(type="http", scheme="bearer")}
        )
    app = Litestar(
        route_handlers=[
            *resources,
            # The dashboard is behind the same guard as the API (a session cookie does for
            # its pages what a bearer token does for the API); signing in and its assets
            # are open.
            DashboardController,
            JobPageController,
            WorkflowPageController,
            QueuePagesController,
            BulkController,
            RegistryPagesController,
            JobsPageController,
            SignInController,
            static_assets(),
            *OPERATIONS,
            docs_assets(),
        ],
        dependencies={
            "jobs": constant(service),
            "queues": constant(QueueService(store)),
            "periodic": constant(Schedules(periodic, store, registry)),
            "types": constant(types),
            "workers": constant(None if processes is None else Workers(processes)),
            "throughput": constant(ThroughputCharts(rollup)),
            "access": constant(DashboardAccess(config.api_tokens, read_only=config.read_only)),
            **operations_dependencies(readiness, metrics),
        },
        guards=[BearerTokenGuard(config.api_tokens)] if config.api_tokens else [],
        before_request=refuse_unsafe_writes,
        exception_handlers=html_on_dashboard_paths(exception_handlers(config.max_body_bytes)),
        template_config=template_config(
            package_version(), read_only=config.read_only, trace_url=config.trace_url
        ),
        request_max_body_size=config.max_body_bytes,
        lifespan=list(lifespan),
        openapi_config=OpenAPIConfig(
            title="jobqueue",
            version=package_version(),
            description="Submit jobs, follow them, retry dead letters, and pause queues. "
            "Every error "
            'is JSON: {"error": "…"}.',
            path=DOCS_PATH,
            components=components,
            render_plugins=[docs_page(), TypedDocument(types)],
        ),
        # Our JSON formatter owns logging; Litestar's default config would install
        # handlers of its own.
        logging_config=None,
    )
    # Built now, with the routes all registered, and completed once.
    complete(app.openapi_schema)
    # Outside Litestar's stack on purpose: its middleware runs only for matched routes,
    # and every response, the router's 404 and 405 included, needs an id and a log line.
    app.asgi_handler = RequestContextMiddleware(app.asgi_handler)
    if tracer_provider is not None:
        app.asgi_handler = traced(app.asgi_handler, tracer_provider)
    return app
