"""`jobqueue serve` as a real process, over real HTTP, on a real database."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.schema import jobs
from tests.support.processes import Service, free_port, start

pytestmark = pytest.mark.slow

BODY_LIMIT = 4096


@pytest.fixture(scope="module")
def service(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    running = start(
        ["serve", "--handlers", "tests.integration.user_handlers"],
        free_port(),
        tmp_path_factory.mktemp("serve"),
        DATABASE_URL=database_url,
        MAX_BODY_BYTES=str(BODY_LIMIT),
        WORKERS="2",
        POLL_INTERVAL="200ms",
    )
    try:
        running.wait_until_healthy()
        yield running
    finally:
        running.stop()


def wait_for_status(base_url: str, job_id: str, status: str, within: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while True:
        body: dict[str, Any] = httpx.get(f"{base_url}/jobs/{job_id}/status", timeout=10).json()
        if body["status"] == status:
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job_id} is {body['status']}, not {status}, after {within}s")
        time.sleep(0.1)


@pytest.mark.usefixtures("engine")
def test_a_job_of_a_user_handler_module_runs_to_completion(service: Service) -> None:
    response = httpx.post(
        f"{service.base_url}/jobs",
        json={"type": "greet", "payload": {"name": "Ada"}},
        headers={"X-Request-ID": "e2e-greet-1"},
        timeout=10,
    )

    assert response.status_code == 201, response.text
    job_id = response.json()["id"]
    done = wait_for_status(service.base_url, job_id, "completed")
    assert done["attempts"] == 1
    log = service.log()
    assert any(line["message"] == "hello Ada" and line.get("job_id") == job_id for line in log)
    [access] = [
        line
        for line in log
        if line.get("request_id") == "e2e-greet-1" and line["logger"] == "jobqueue.access"
    ]
    assert (access["method"], access["path"], access["status"]) == ("POST", "/jobs", 201)
    [submitted] = [
        line for line in log if line["message"] == "job submitted" and line.get("job_id") == job_id
    ]
    assert submitted["request_id"] == "e2e-greet-1"


@pytest.mark.usefixtures("engine")
def test_a_payload_the_user_handler_refuses_is_a_400(service: Service) -> None:
    response = httpx.post(
        f"{service.base_url}/jobs", json={"type": "greet", "payload": {"nom": "Ada"}}, timeout=10
    )

    assert response.status_code == 400
    assert "invalid payload for job type 'greet'" in response.json()["error"]


async def test_twenty_concurrent_duplicates_create_one_job(
    service: Service, engine: AsyncEngine
) -> None:
    async with httpx.AsyncClient(base_url=service.base_url, timeout=30) as client:
        responses = await asyncio.gather(
            *(
                client.post(
                    "/jobs",
                    json={"type": "greet", "payload": {"name": "twin"}},
                    headers={"Idempotency-Key": "e2e-burst"},
                )
                for _ in range(20)
            )
        )

    assert sorted(response.status_code for response in responses) == [200] * 19 + [201]
    assert len({response.json()["id"] for response in responses}) == 1
    async with engine.connect() as connection:
        assert await connection.scalar(select(func.count()).select_from(jobs)) == 1


JSON = {"content-type": "application/json"}


def test_a_chunked_body_over_the_limit_is_a_413(service: Service) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"type": "greet", "payload": {"name": "'
        for _ in range(BODY_LIMIT // 512 + 2):
            yield b"x" * 512
        yield b'"}}'

    response = httpx.post(f"{service.base_url}/jobs", content=chunks(), headers=JSON, timeout=10)

    assert response.status_code == 413
    assert response.json() == {"error": f"request body too large: the limit is {BODY_LIMIT} bytes"}


def test_a_declared_length_over_the_limit_is_a_413(service: Service) -> None:
    response = httpx.post(
        f"{service.base_url}/jobs",
        content=b"{" + b" " * BODY_LIMIT + b"}",
        headers=JSON,
        timeout=10,
    )

    assert response.status_code == 413
    assert response.headers["x-request-id"]


def test_probes_and_metrics_answer(service: Service) -> None:
    assert httpx.get(f"{service.base_url}/healthz", timeout=10).json() == {"status": "ok"}
    assert httpx.get(f"{service.base_url}/readyz", timeout=10).json() == {"status": "ready"}
    metrics = httpx.get(f"{service.base_url}/metrics", timeout=10)
    assert "jobs_submitted_total" in metrics.text
    assert "jobs_queue_depth" in metrics.text


def test_the_log_says_which_database_is_used_without_its_password(service: Service) -> None:
    [line] = [entry for entry in service.log() if entry["message"].startswith("using the database")]

    assert line["database"].startswith("postgresql+asyncpg://")
    running = [entry for entry in service.log() if entry["message"] == "jobqueue serve running"]
    assert running[0]["job_types"] == ["greet", "sleep", "webhook"]
