"""Probes, request ids and logs, metrics."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.job import NewJob
from tests.support.api import SLEEP, Api, api, build_api, client, eventually, metric_value
from tests.support.logs import captured_json_log
from tests.support.postgres import with_database

# Fixtures of tests.support.api, used by name.
__all__ = ["api", "client"]


# --- probes ----------------------------------------------------------------------------


async def test_healthz_answers_ok(client: AsyncTestClient[Any]) -> None:
    response = await client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_readyz_is_ready_while_the_database_answers(client: AsyncTestClient[Any]) -> None:
    response = await client.get("/readyz")

    assert response.status_code == 200
    assert response.json() == {"status": "ready"}


async def test_readyz_is_503_once_draining_while_healthz_stays_ok(
    api: Api, client: AsyncTestClient[Any]
) -> None:
    api.readiness.drain()

    ready = await client.get("/readyz")
    alive = await client.get("/healthz")

    assert ready.status_code == 503
    assert ready.json() == {"error": "not ready: shutting down"}
    assert alive.status_code == 200


async def test_readyz_is_503_when_the_database_is_unreachable(postgres_server: Any) -> None:
    missing = with_database(postgres_server.url, f"jq_missing_{uuid.uuid4().hex[:8]}")
    api = build_api(missing)
    async with AsyncTestClient(app=api.app) as client:
        ready = await client.get("/readyz")
        alive = await client.get("/healthz")

    assert ready.status_code == 503
    assert ready.json() == {"error": "not ready: database unreachable"}
    assert alive.status_code == 200


# --- request ids and logs --------------------------------------------------------------


async def test_a_sane_caller_request_id_is_echoed(client: AsyncTestClient[Any]) -> None:
    response = await client.get("/healthz", headers={"X-Request-ID": "caller-abc.123"})

    assert response.headers["x-request-id"] == "caller-abc.123"


@pytest.mark.parametrize(
    "given", [None, b"", b"x" * 129, b"has space", b"tab\there", "naïve".encode(), b"del\x7f"]
)
async def test_a_missing_or_insane_request_id_is_replaced_by_a_generated_one(
    client: AsyncTestClient[Any], given: bytes | None
) -> None:
    headers: dict[bytes, bytes] = {} if given is None else {b"X-Request-ID": given}

    response = await client.get("/healthz", headers=headers)

    generated = response.headers["x-request-id"]
    assert uuid.UUID(hex=generated)


async def test_generated_request_ids_differ_between_requests(
    client: AsyncTestClient[Any],
) -> None:
    first = await client.get("/healthz")
    second = await client.get("/healthz")

    assert first.headers["x-request-id"] != second.headers["x-request-id"]


async def test_every_request_writes_one_access_log_line_with_its_request_id(
    client: AsyncTestClient[Any],
) -> None:
    with captured_json_log() as log:
        ok = await client.get("/healthz", headers={"X-Request-ID": "access-1"})
        missing = await client.get("/nope")
        wrong_method = await client.delete("/healthz")

    access = log.find(logger="jobqueue.access")
    assert [(line["method"], line["path"], line["status"]) for line in access] == [
        ("GET", "/healthz", 200),
        ("GET", "/nope", 404),
        ("DELETE", "/healthz", 405),
    ]
    assert [line["request_id"] for line in access] == [
        ok.headers["x-request-id"],
        missing.headers["x-request-id"],
        wrong_method.headers["x-request-id"],
    ]
    assert access[0]["request_id"] == "access-1"
    for line in access:
        assert line["message"] == "request"
        assert line["level"] == "INFO"
        assert isinstance(line["duration_ms"], float)
        assert line["duration_ms"] >= 0
        assert line["ts"].endswith("Z")


async def test_submission_logs_carry_the_request_id_and_the_job_id(
    client: AsyncTestClient[Any],
) -> None:
    with captured_json_log() as log:
        first = await client.post(
            "/jobs", json=SLEEP, headers={"X-Request-ID": "submit-1", "Idempotency-Key": "log-1"}
        )
        again = await client.post(
            "/jobs", json=SLEEP, headers={"X-Request-ID": "submit-2", "Idempotency-Key": "log-1"}
        )

    job_id = first.json()["id"]
    assert again.json()["id"] == job_id
    submitted = log.find(message="job submitted")
    assert [(line["request_id"], line["job_id"], line["replayed"]) for line in submitted] == [
        ("submit-1", job_id, False),
        ("submit-2", job_id, True),
    ]
    assert all(line["job_type"] == "sleep" for line in submitted)


# --- metrics -----------------------------------------------------------------------------


async def test_metrics_are_prometheus_text_and_count_submissions_without_replays(
    client: AsyncTestClient[Any],
) -> None:
    await client.post("/jobs", json=SLEEP, headers={"Idempotency-Key": "m-1"})
    await client.post("/jobs", json=SLEEP, headers={"Idempotency-Key": "m-1"})
    await client.post("/jobs", json=SLEEP)

    response = await client.get("/metrics")

    assert response.status_code == 200
    # The exposition format's type, its charset named once.
    assert response.headers["content-type"] == "text/plain; version=1.0.0; charset=utf-8"
    text = response.text
    assert metric_value(text, "jobs_submitted_total") == 2
    for name in (
        "jobs_completed_total",
        "jobs_failed_total",
        "jobs_retried_total",
        "jobs_recovered_total",
        "job_processing_duration_seconds",
        "jobs_queue_depth",
        "process_cpu_seconds_total",
    ):
        assert f"# TYPE {name.removesuffix('_total')}" in text, name


async def test_queue_depth_gauge_reports_jobs_by_status(
    engine: AsyncEngine, database_url: str
) -> None:
    store = PostgresJobStore(engine)
    for _ in range(3):
        await store.submit(NewJob.build(type="sleep", default_max_attempts=1))
    api = build_api(database_url, with_queue_depth=True)

    async with AsyncTestClient(app=api.app) as client:
        text = await eventually(
            lambda: _metrics(client),
            lambda t: metric_value(t, "jobs_queue_depth", {"status": "pending"}) == 3,
        )

    assert metric_value(text, "jobs_queue_depth", {"status": "completed"}) == 0
    assert 'jobs_queue_depth{status="dead_letter"} 0.0' in text


async def _metrics(client: AsyncTestClient[Any]) -> str:
    return (await client.get("/metrics")).text


async def test_apps_in_one_process_keep_separate_metrics(database_url: str) -> None:
    first, second = build_api(database_url), build_api(database_url)
    async with AsyncTestClient(app=first.app) as one, AsyncTestClient(app=second.app) as two:
        await one.post("/jobs", json=SLEEP)

        assert metric_value((await one.get("/metrics")).text, "jobs_submitted_total") == 1
        assert metric_value((await two.get("/metrics")).text, "jobs_submitted_total") == 0
