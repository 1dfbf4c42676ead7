"""`create_app`: the Litestar application, built from settings and ready adapters.

Nothing is created at import time; every call builds an independent app, so tests can
run several in one process.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from litestar import Litestar, Router
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.openapi.spec import Components, SecurityScheme
from litestar.types import ControllerRouterHandler
from opentelemetry.trace import TracerProvider

from jobqueue.adapters.telemetry.metrics import Metrics, QueueDepthRefresher, QueueDepthSource
from jobqueue.domain.job import Job
from jobqueue.domain.ports import JobStore, PayloadDecoder
from jobqueue.domain.registry import Registry
from jobqueue.entrypoints.config import Settings
from jobqueue.entrypoints.http.errors import exception_handlers
from jobqueue.entrypoints.http.health import Readiness, healthz, metrics_endpoint, readyz
from jobqueue.entrypoints.http.middleware import BearerTokenGuard, RequestContextMiddleware
from jobqueue.entrypoints.http.routes import JobsController
from jobqueue.entrypoints.http.service import JobService
from jobqueue.entrypoints.http.tracing import traced

Lifespan = Callable[[Litestar], AbstractAsyncContextManager[None]]

_BEARER = "bearerAuth"


def create_app(
    settings: Settings,
    *,
    store: JobStore,
    registry: Registry,
    decoder: PayloadDecoder,
    metrics: Metrics | None = None,
    readiness: Readiness | None = None,
    queue_depth: QueueDepthSource | None = None,
    on_enqueued: Callable[[Job], None] | None = None,
    lifespan: Sequence[Lifespan] = (),
    tracer_provider: TracerProvider | None = None,
) -> Litestar:
    """The HTTP API over `store`.

    `readiness` is shared with whoever runs the shutdown (it flips `/readyz` to 503);
    `queue_depth`, when given, feeds the `jobs_queue_depth` gauge while the app runs;
    `on_enqueued` is told about every job that became pending (a local pool's `wake`);
    `lifespan` adds context managers entered at startup, after the app's own;
    `tracer_provider`, when given, traces every request but the probes (none otherwise).
    """
    metrics = metrics if metrics is not None else Metrics()
    readiness = readiness if readiness is not None else Readiness(store)
    service = JobService(
        store,
        registry,
        decoder,
        metrics,
        default_max_attempts=settings.max_attempts,
        on_enqueued=on_enqueued,
    )
    jobs_routes: ControllerRouterHandler = JobsController
    components = Components()
    if settings.api_tokens:
        # A router only to attach the security requirement to /jobs in the OpenAPI
        # document; the guard enforces it everywhere but on the open probes.
        jobs_routes = Router(path="/", route_handlers=[JobsController], security=[{_BEARER: []}])
        components = Components(
            security_schemes={_BEARER: SecurityScheme(type="http", scheme="bearer")}
        )
    own_lifespans: list[Lifespan] = []
    if queue_depth is not None:
        own_lifespans.append(_refreshing(QueueDepthRefresher(queue_depth, metrics)))
    app = Litestar(
        route_handlers=[jobs_routes, healthz, readyz, metrics_endpoint],
        dependencies={
            "jobs": _constant(service),
            "readiness": _constant(readiness),
            "metrics": _constant(metrics),
        },
        guards=[BearerTokenGuard(settings.api_tokens)] if settings.api_tokens else [],
        exception_handlers=exception_handlers(settings.max_body_bytes),
        request_max_body_size=settings.max_body_bytes,
        lifespan=[*own_lifespans, *lifespan],
        openapi_config=OpenAPIConfig(
            title="jobqueue",
            version=_package_version(),
            description="Submit jobs, follow them, and requeue dead letters. Every error "
            'is JSON: {"error": "…"}.',
            path="/schema",
            components=components,
        ),
        # Our JSON formatter owns logging; Litestar's default config would install
        # handlers of its own.
        logging_config=None,
    )
    # Outside Litestar's stack on purpose: its middleware runs only for matched routes,
    # and every response, the router's 404 and 405 included, needs an id and a log line.
    app.asgi_handler = RequestContextMiddleware(app.asgi_handler)
    if tracer_provider is not None:
        app.asgi_handler = traced(app.asgi_handler, tracer_provider)
    return app


def _constant(value: Any) -> Provide:
    def provide() -> Any:
        return value

    return Provide(provide, use_cache=True, sync_to_thread=False)


def _refreshing(refresher: QueueDepthRefresher) -> Lifespan:
    @asynccontextmanager
    async def run(app: Litestar) -> AsyncIterator[None]:
        task = asyncio.create_task(refresher.run(), name="jobqueue queue depth")
        try:
            yield
        finally:
            refresher.stop()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    return run


def _package_version() -> str:
    try:
        return version("jobqueue")
    except PackageNotFoundError:  # pragma: no cover - running from a bare source tree
        return "0+unknown"
