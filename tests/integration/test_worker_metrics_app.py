"""The metrics listener's app in-process: only the probes and the scrape, meaning what they
mean in the API. No database: the store is the in-memory fake."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from jobqueue.adapters.telemetry.metrics import Metrics
from jobqueue.domain.errors import StoreError, StoreUnavailable
from jobqueue.domain.job import NewJob
from jobqueue.domain.outcome import Decision
from jobqueue.entrypoints.http.health import Readiness
from jobqueue.entrypoints.http.ops import create_ops_app
from tests.fakes import InMemoryJobStore


class UnreachableStore(InMemoryJobStore):
    async def ping(self) -> None:
        raise StoreUnavailable("connection refused by db.internal:5432")


class RefusingStore(InMemoryJobStore):
    async def ping(self) -> None:
        raise StoreError("42501 InsufficientPrivilegeError: permission denied", "42501")


def client_for(readiness: Readiness, metrics: Metrics | None = None) -> AsyncTestClient[Any]:
    app = create_ops_app(metrics=metrics or Metrics(), readiness=readiness)
    return AsyncTestClient(app=app)


async def test_probes_answer_ok_and_ready_while_the_store_answers() -> None:
    async with client_for(Readiness(InMemoryJobStore())) as client:
        alive = await client.get("/healthz")
        ready = await client.get("/readyz")

    assert (alive.status_code, alive.json()) == (200, {"status": "ok"})
    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})


async def test_readyz_is_503_while_draining_and_healthz_stays_ok() -> None:
    readiness = Readiness(InMemoryJobStore())
    readiness.drain()
    async with client_for(readiness) as client:
        ready = await client.get("/readyz")
        alive = await client.get("/healthz")

    assert (ready.status_code, ready.json()) == (503, {"error": "not ready: shutting down"})
    assert alive.status_code == 200


async def test_readyz_is_503_without_the_driver_message_when_the_store_is_unreachable() -> None:
    async with client_for(Readiness(UnreachableStore())) as client:
        ready = await client.get("/readyz")

    assert (ready.status_code, ready.json()) == (503, {"error": "not ready: database unreachable"})


async def test_readyz_is_503_when_the_store_refuses_the_check() -> None:
    async with client_for(Readiness(RefusingStore())) as client:
        ready = await client.get("/readyz")

    assert (ready.status_code, ready.json()) == (
        503,
        {"error": "not ready: database refused the check"},
    )


async def test_metrics_exposes_the_registry_the_pool_observer_writes_to() -> None:
    store = InMemoryJobStore()
    submitted = await store.submit(NewJob.build(type="sleep", default_max_attempts=1))
    metrics = Metrics()
    metrics.attempt_finished(submitted.job, Decision.complete(), 0.2)
    async with client_for(Readiness(store), metrics) as client:
        response = await client.get("/metrics")

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert 'jobs_completed_total{queue="default",type="sleep"} 1.0' in response.text
    assert (
        'job_processing_duration_seconds_count{outcome="completed",queue="default",type="sleep"}'
        " 1.0" in response.text
    )


@pytest.mark.parametrize(
    ("method", "path"), [("GET", "/jobs"), ("POST", "/jobs"), ("GET", "/schema")]
)
async def test_nothing_but_the_probes_and_the_scrape_is_served(method: str, path: str) -> None:
    async with client_for(Readiness(InMemoryJobStore())) as client:
        response = await client.request(method, path)

    assert response.status_code == 404
    assert "error" in response.json()
    assert response.headers.get("x-request-id")
