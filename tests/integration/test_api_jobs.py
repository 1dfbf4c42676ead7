"""The /jobs resource over HTTP, against a real PostgreSQL: submit, run, read, requeue."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.entrypoints.config.settings import Settings
from tests.support.api import Api, build_api, metric_value
from tests.support.gated_jobs import RECORD_FIELDS, Gate, handlers_for, wait_for_status

RFC3339_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z$")


@pytest.fixture
def gate() -> Gate:
    return Gate()


@pytest.fixture
def api(engine: AsyncEngine, database_url: str, gate: Gate) -> Api:
    # `engine` only empties the table first; the app runs on an engine of its own.
    return build_api(
        database_url,
        settings=Settings(max_attempts=3),
        handlers=handlers_for(gate),
        with_pool=True,
    )


@pytest.fixture
async def client(api: Api) -> AsyncIterator[AsyncTestClient[Any]]:
    async with AsyncTestClient(app=api.app) as client:
        yield client


async def metrics_text(client: httpx.AsyncClient) -> str:
    response = await client.get("/metrics")
    assert response.status_code == 200
    return response.text


async def test_submitted_job_is_run_to_completion_by_the_pool(
    client: AsyncTestClient[Any],
) -> None:
    response = await client.post(
        "/jobs", json={"type": "sleep", "payload": {"duration": "10ms"}, "max_attempts": 2}
    )

    assert response.status_code == 201, response.text
    created = response.json()
    assert set(created) == RECORD_FIELDS | {"duplicate", "replayed"}
    assert response.headers["location"] == f"/jobs/{created['id']}"
    assert created["type"] == "sleep"
    assert created["payload"] == {"duration": "10ms"}
    assert created["status"] == "pending"
    assert created["attempts"] == 0
    assert created["max_attempts"] == 2
    assert created["last_error"] is None
    assert created["idempotency_key"] is None
    for name in ("run_at", "created_at", "updated_at"):
        assert RFC3339_UTC.match(created[name]), created[name]

    done = await wait_for_status(client, created["id"], "completed")
    assert done["attempts"] == 1
    assert done["last_error"] is None


async def test_defaults_apply_when_payload_and_max_attempts_are_absent(
    client: AsyncTestClient[Any],
) -> None:
    response = await client.post("/jobs", json={"type": "gated"})

    assert response.status_code == 201, response.text
    assert response.json()["payload"] == {}
    assert response.json()["max_attempts"] == 3  # Settings(max_attempts=3)


async def test_get_job_returns_the_full_record_and_status_the_short_view(
    client: AsyncTestClient[Any],
) -> None:
    created = (
        await client.post(
            "/jobs",
            json={"type": "sleep", "payload": {"duration": "1ms"}},
            headers={"Idempotency-Key": "record-1"},
        )
    ).json()

    record = await client.get(f"/jobs/{created['id']}")
    status = await client.get(f"/jobs/{created['id']}/status")

    assert record.status_code == 200
    assert set(record.json()) == RECORD_FIELDS
    assert record.json()["id"] == created["id"]
    assert record.json()["idempotency_key"] == "record-1"
    assert status.status_code == 200
    assert set(status.json()) == {
        "id",
        "status",
        "attempts",
        "max_attempts",
        "run_at",
        "last_error",
    }


async def test_idempotent_replay_returns_the_first_job_with_200(
    client: AsyncTestClient[Any],
) -> None:
    first = await client.post(
        "/jobs",
        content=b'{"type": "gated", "payload": {"to": "x", "note": {"a": 1, "b": [1, 2]}}}',
        headers={"Idempotency-Key": "replay-1", "Content-Type": "application/json"},
    )
    # The same request written differently: key order and whitespace do not matter.
    again = await client.post(
        "/jobs",
        content=b'{"payload":{"note":{"b":[1,2],"a":1},"to":"x"},\n "type":"gated"}',
        headers={"Idempotency-Key": "replay-1", "Content-Type": "application/json"},
    )

    assert first.status_code == 201, first.text
    assert again.status_code == 200, again.text
    assert again.json()["id"] == first.json()["id"]
    assert (first.json()["replayed"], again.json()["replayed"]) == (False, True)
    assert metric_value(await metrics_text(client), "jobs_submitted_total") == 1


async def test_reusing_a_key_for_a_different_request_is_a_409(
    client: AsyncTestClient[Any],
) -> None:
    first = await client.post(
        "/jobs",
        json={"type": "sleep", "payload": {"duration": "1ms"}},
        headers={"Idempotency-Key": "conflict-1"},
    )
    other_payload = await client.post(
        "/jobs",
        json={"type": "sleep", "payload": {"duration": "2ms"}},
        headers={"Idempotency-Key": "conflict-1"},
    )
    other_budget = await client.post(
        "/jobs",
        json={"type": "sleep", "payload": {"duration": "1ms"}, "max_attempts": 1},
        headers={"Idempotency-Key": "conflict-1"},
    )

    assert first.status_code == 201
    for response in (other_payload, other_budget):
        assert response.status_code == 409, response.text
        assert "conflict-1" in response.json()["error"]
        assert "already used" in response.json()["error"]


async def test_dead_lettered_job_is_requeued_by_retry_and_then_completes(
    client: AsyncTestClient[Any], gate: Gate
) -> None:
    created = (await client.post("/jobs", json={"type": "gated", "max_attempts": 2})).json()
    dead = await wait_for_status(client, created["id"], "dead_letter")
    assert dead["attempts"] == 2
    assert "gate closed" in dead["last_error"]

    gate.open = True
    response = await client.post(f"/jobs/{created['id']}/retry")

    assert response.status_code == 200, response.text
    assert set(response.json()) == RECORD_FIELDS
    assert response.json()["status"] == "pending"
    assert response.json()["attempts"] == 0
    done = await wait_for_status(client, created["id"], "completed")
    assert done["attempts"] == 1


async def test_retry_refuses_jobs_that_are_not_dead_lettered(
    client: AsyncTestClient[Any],
) -> None:
    created = (
        await client.post("/jobs", json={"type": "sleep", "payload": {"duration": "1ms"}})
    ).json()
    await wait_for_status(client, created["id"], "completed")

    response = await client.post(f"/jobs/{created['id']}/retry")

    assert response.status_code == 409
    assert response.json()["error"] == (
        f"cannot retry job {created['id']}: it is completed; "
        "only failed, dead-lettered and cancelled jobs can be retried"
    )


async def test_counters_and_histogram_move_as_jobs_complete_and_fail(
    client: AsyncTestClient[Any],
) -> None:
    ok = (await client.post("/jobs", json={"type": "sleep", "payload": {"duration": "1ms"}})).json()
    broken = (await client.post("/jobs", json={"type": "broken"})).json()
    dead = (await client.post("/jobs", json={"type": "gated", "max_attempts": 2})).json()
    await wait_for_status(client, ok["id"], "completed")
    failed = await wait_for_status(client, broken["id"], "failed")
    await wait_for_status(client, dead["id"], "dead_letter")

    text = await metrics_text(client)

    assert "broken on purpose" in failed["last_error"]
    assert metric_value(text, "jobs_submitted_total") == 3
    sleep, broken, gated = ({"queue": "default", "type": t} for t in ("sleep", "broken", "gated"))
    assert metric_value(text, "jobs_completed_total", sleep) == 1
    assert metric_value(text, "jobs_failed_total", {**broken, "status": "failed"}) == 1
    assert metric_value(text, "jobs_failed_total", {**gated, "status": "dead_letter"}) == 1
    assert metric_value(text, "jobs_retried_total", gated) == 1
    assert metric_value(text, "jobs_retried_total", sleep) == 0
    assert metric_value(text, "jobs_recovered_total", sleep) == 0
    count = "job_processing_duration_seconds_count"
    assert metric_value(text, count, {**sleep, "outcome": "completed"}) == 1
    assert metric_value(text, count, {**broken, "outcome": "failed"}) == 1
    assert metric_value(text, count, {**gated, "outcome": "retried"}) == 1
    assert metric_value(text, count, {**gated, "outcome": "dead_letter"}) == 1
    assert metric_value(text, "job_pickup_latency_seconds_count", gated) == 2
    assert metric_value(text, "process_cpu_seconds_total") > 0
