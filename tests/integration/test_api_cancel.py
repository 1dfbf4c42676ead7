"""Cancelling jobs over HTTP: one by id, or many by filter; the answers for jobs that
cannot be cancelled; the metric an operator watches."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any
from uuid import uuid4

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.job import NewJob
from jobqueue.domain.outcome import Decision
from tests.fakes import TEST_TYPES
from tests.support.api import build_api, resolved
from tests.support.endings import record

LEASE = timedelta(minutes=5)


@pytest.fixture
async def client(engine: AsyncEngine, database_url: str) -> AsyncIterator[AsyncTestClient[Any]]:
    async with AsyncTestClient(app=build_api(database_url).app) as client:
        yield client


async def _submit(client: AsyncTestClient[Any], **fields: Any) -> str:
    body = {"type": "sleep", "payload": {"duration": "1ms"}, **fields}
    response = await client.post("/jobs", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def test_a_pending_job_is_cancelled_and_can_be_retried(client: AsyncTestClient[Any]) -> None:
    job = await _submit(client, delay="1h")

    response = await client.post(f"/jobs/{job}/cancel")

    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["status"], body["attempts"], body["history"]) == ("cancelled", 0, [])
    assert body["finished_at"] == body["updated_at"]
    listed = (await client.get("/jobs", params={"status": "cancelled"})).json()
    assert [each["id"] for each in listed["jobs"]] == [job]

    retried = await client.post(f"/jobs/{job}/retry")
    assert retried.status_code == 200, retried.text
    assert retried.json()["status"] == "pending"


async def test_a_running_job_is_cancelled_and_its_attempt_kept(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    store = PostgresJobStore(engine, worker="host-a:42")
    job = await _submit(client)
    (claimed,) = await store.claim(1, LEASE, types=TEST_TYPES)

    response = await client.post(f"/jobs/{job}/cancel")

    body = response.json()
    assert body["status"] == "cancelled"
    assert [(a["attempt"], a["outcome"], a["worker"]) for a in body["history"]] == [
        (1, "cancelled", "host-a:42")
    ]
    # The attempt's own ending is fenced out.
    assert await store.record_many([(claimed.lease, Decision.complete())]) == set()
    assert (await client.get(f"/jobs/{job}")).json()["status"] == "cancelled"
    metrics = (await client.get("/metrics")).text
    assert "jobs_cancelled_total 1.0" in metrics


async def test_a_job_that_ended_is_a_409_and_an_unknown_one_a_404(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    store = PostgresJobStore(engine)
    job = (await store.submit(NewJob(type="sleep", max_attempts=3))).job
    (claimed,) = await store.claim(1, LEASE, types=TEST_TYPES)
    await record(store, claimed.lease, Decision.complete())

    finished = await client.post(f"/jobs/{job.id}/cancel")
    missing = await client.post(f"/jobs/{uuid4()}/cancel")
    malformed = await client.post("/jobs/not-a-uuid/cancel")

    assert finished.status_code == 409
    assert finished.json()["error"] == (
        f"cannot cancel job {job.id}: it is completed; only pending and running jobs can be "
        "cancelled"
    )
    assert missing.status_code == 404
    assert malformed.status_code == 400
    assert (await store.get(job.id)).status.value == "completed"


async def test_cancel_by_filter_takes_the_first_up_to_the_limit(
    client: AsyncTestClient[Any],
) -> None:
    mail = [await _submit(client, queue="mail") for _ in range(3)]
    other = await _submit(client, queue="other")

    response = await client.post(
        "/jobs/cancel", json={"status": "pending", "queue": "mail", "limit": 2}
    )

    assert response.status_code == 200, response.text
    assert response.json() == {"cancelled": 2}
    statuses = [(await client.get(f"/jobs/{job}")).json()["status"] for job in [*mail, other]]
    assert statuses == ["cancelled", "cancelled", "pending", "pending"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "Object missing required field `status`"),
        (
            {"status": "completed"},
            "status must be pending or processing or waiting, got 'completed'",
        ),
        ({"status": "pending", "limit": 0}, "Expected `int` >= 1"),
        ({"status": "pending", "colour": "red"}, "unknown field `colour`"),
    ],
)
async def test_a_bad_cancel_filter_is_a_400_and_touches_nothing(
    client: AsyncTestClient[Any], body: dict[str, Any], message: str
) -> None:
    job = await _submit(client)

    response = await client.post("/jobs/cancel", json=body)

    assert response.status_code == 400, response.text
    assert message in response.json()["error"]
    assert (await client.get(f"/jobs/{job}")).json()["status"] == "pending"


async def test_the_openapi_document_shows_the_cancel_routes(client: AsyncTestClient[Any]) -> None:
    document = (await client.get("/schema/openapi.json")).json()
    paths = document["paths"]

    assert set(paths["/jobs/{job_id}/cancel"]["post"]["responses"]) >= {"200", "404", "409"}
    body = paths["/jobs/cancel"]["post"]["requestBody"]["content"]["application/json"]
    schema = resolved(document, body["schema"])
    assert schema["properties"]["status"]["enum"] == ["pending", "processing", "waiting"]
