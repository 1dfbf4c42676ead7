"""Helpers for the API tests: an app over a real store, optionally with a worker pool,
and as fixtures (`api`, `client`) on the module's database; JSON log capture, polling
for a condition with a deadline, and reading the OpenAPI document."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, TypeVar

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient
from opentelemetry.trace import TracerProvider
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.handlers import builtin_registry
from jobqueue.adapters.payload_schemas import JsonSchemaCompiler
from jobqueue.adapters.payloads import MsgspecPayloadDecoder
from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.job_types import PostgresJobTypes
from jobqueue.adapters.postgres.processes import PostgresProcesses
from jobqueue.adapters.postgres.rollup import PostgresRollup
from jobqueue.adapters.postgres.stats import PostgresQueueStats
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.adapters.telemetry.job_spans import JobSpans
from jobqueue.adapters.telemetry.metrics import Metrics, QueueDepthRefresher
from jobqueue.adapters.telemetry.tracing import trace_engine
from jobqueue.domain.backoff import Backoff
from jobqueue.domain.ports import JobStore
from jobqueue.domain.registry import Registry
from jobqueue.entrypoints.config.settings import Settings
from jobqueue.entrypoints.http.app import create_app
from jobqueue.entrypoints.http.health import Readiness
from jobqueue.entrypoints.service.components import Runnable
from jobqueue.entrypoints.service.compose import http_config
from jobqueue.entrypoints.service.published_types import Published, TypeCatalogue
from jobqueue.entrypoints.worker.pool import WorkerPool
from jobqueue.entrypoints.worker.pool_config import pool_config
from tests.support.pgbouncer import routed_url

T = TypeVar("T")

SLEEP = {"type": "sleep", "payload": {"duration": "1s"}}

FAST_POOL = replace(
    pool_config(Settings()),
    workers=2,
    job_timeout=timedelta(seconds=10),
    lease_duration=timedelta(seconds=60),
    poll_interval=timedelta(milliseconds=200),
    shutdown_timeout=timedelta(seconds=5),
    backoff=Backoff(timedelta(milliseconds=10), timedelta(milliseconds=50)),
)


@dataclass
class Api:
    app: Litestar
    metrics: Metrics
    readiness: Readiness
    registry: Registry
    pool: WorkerPool | None = None
    # The app's own engine, when `build_api` made one: to capture what the app sends.
    engine: AsyncEngine | None = None


def build_api(
    database_url: str | None = None,
    *,
    store: JobStore | None = None,
    settings: Settings | None = None,
    handlers: Registry | None = None,
    with_pool: bool = False,
    with_queue_depth: bool = False,
    tracer_provider: TracerProvider | None = None,
    published_types: bool = False,
) -> Api:
    """`create_app` as the composition root wires it, over a store of its own on
    `database_url` (or `store`), with a pool in the app's lifespan when `with_pool`, and
    the queue-depth refresher when `with_queue_depth`; with `published_types`, the API
    knows the types workers published on `database_url`, as the API role does.

    Litestar's AsyncTestClient runs the app on an event loop in another thread, so the
    app gets an engine of its own, used and disposed on that loop only; the test's
    `engine` fixture stays on the test's loop. `tracer_provider` traces the requests,
    the attempts and the statements, as with OTEL_TRACES_EXPORTER set.
    """
    settings = settings if settings is not None else Settings()
    lifespans: list[Callable[[Litestar], Any]] = []
    metrics = Metrics()
    processes: PostgresProcesses | None = None
    published: Published | None = None
    engine: AsyncEngine | None = None
    rollup: PostgresRollup | None = None
    if store is None:
        if database_url is None:
            raise ValueError("build_api needs a database_url or a store")
        url, pooler = routed_url(database_url)
        engine = create_engine(url, pool_size=5, pooler=pooler)
        store = PostgresJobStore(engine)
        processes = PostgresProcesses(engine)
        if published_types:
            published = Published(PostgresJobTypes(engine), JsonSchemaCompiler())
        rollup = PostgresRollup(engine)
        lifespans.append(_disposing(engine))
        if tracer_provider is not None:
            trace_engine(engine, tracer_provider)
        if with_queue_depth:
            lifespans.append(_running(QueueDepthRefresher(PostgresQueueStats(engine), metrics)))
    registry = builtin_registry(webhook_allow_private=False)
    if handlers is not None:
        registry.include(handlers)
    decoder = MsgspecPayloadDecoder()
    readiness = Readiness(store)
    tracer = JobSpans(tracer_provider) if tracer_provider is not None else None
    pool = (
        WorkerPool(store, registry, decoder, FAST_POOL, observer=metrics, tracer=tracer)
        if with_pool
        else None
    )
    app = create_app(
        http_config(settings),
        store=store,
        registry=registry,
        decoder=decoder,
        metrics=metrics,
        readiness=readiness,
        on_enqueued=pool.wake if pool is not None else None,
        lifespan=[*lifespans, _running(pool)] if pool is not None else lifespans,
        tracer_provider=tracer_provider,
        processes=processes,
        types=TypeCatalogue(registry, decoder, published) if published is not None else None,
        rollup=rollup,
    )
    return Api(
        app=app, metrics=metrics, readiness=readiness, registry=registry, pool=pool, engine=engine
    )


def _disposing(engine: AsyncEngine) -> Callable[[Litestar], Any]:
    @asynccontextmanager
    async def dispose(app: Litestar) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await engine.dispose()

    return dispose


def _running(component: Runnable) -> Callable[[Litestar], Any]:
    """Runs `component` (the pool, the queue-depth refresher) while the app runs."""

    @asynccontextmanager
    async def run(app: Litestar) -> AsyncIterator[None]:
        task = asyncio.create_task(component.run())
        try:
            yield
        finally:
            component.stop()
            await task

    return run


@pytest.fixture
def api(engine: AsyncEngine, database_url: str) -> Api:
    return build_api(database_url)


@pytest.fixture
async def client(api: Api) -> AsyncIterator[AsyncTestClient[Any]]:
    async with AsyncTestClient(app=api.app) as client:
        yield client


async def eventually(
    probe: Callable[[], Awaitable[T]],
    accept: Callable[[T], bool],
    *,
    within: float = 30.0,
    interval: float = 0.05,
) -> T:
    """Poll `probe` until `accept` holds for its value; fail after `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        value = await probe()
        if accept(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {within}s; last value: {value!r}")
        await asyncio.sleep(interval)


def metric_value(exposition: str, name: str, labels: dict[str, str] | None = None) -> float:
    """The value of one sample in Prometheus text format (0 when absent): the one named
    `name` with exactly `labels`, in whatever order the exposition writes them."""
    wanted = labels or {}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            if sample.name == name and sample.labels == wanted:
                return float(sample.value)
    return 0.0


def resolved(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """`schema`, or the component its `$ref` names."""
    reference = schema.get("$ref")
    if reference is None:
        return schema
    found: dict[str, Any] = document["components"]["schemas"][reference.rsplit("/", 1)[1]]
    return found


def _operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method in {"get", "post", "put", "delete", "patch"}:
                yield method, path, operation
