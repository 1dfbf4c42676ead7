"""`/queues` over HTTP: listing what waits in each queue, pausing and resuming one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.store import PostgresJobStore
from tests.fakes import TEST_TYPES
from tests.support.api import build_api

LEASE = timedelta(minutes=5)


@pytest.fixture
async def client(engine: AsyncEngine, database_url: str) -> AsyncIterator[AsyncTestClient[Any]]:
    async with AsyncTestClient(app=build_api(database_url).app) as client:
        yield client


async def _submit(client: AsyncTestClient[Any], **fields: Any) -> dict[str, Any]:
    response = await client.post(
        "/jobs", json={"type": "sleep", "payload": {"duration": "1ms"}, **fields}
    )
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_pause_and_resume_answer_the_queue_s_state_and_the_claim_obeys(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    job = await _submit(client, queue="mail")
    store = PostgresJobStore(engine)

    paused = await client.post("/queues/mail/pause")
    assert paused.status_code == 200, paused.text
    body = paused.json()
    assert (body["name"], body["paused"]) == ("mail", True)
    assert body["paused_at"].endswith("Z")
    again = (await client.post("/queues/mail/pause")).json()
    assert again["paused_at"] == body["paused_at"]
    assert await store.claim(5, LEASE, "mail", types=TEST_TYPES) == []

    resumed = await client.post("/queues/mail/resume")
    assert resumed.status_code == 200, resumed.text
    assert resumed.json() == {
        "name": "mail",
        "paused": False,
        "paused_at": None,
        "limits": dict.fromkeys(
            (
                "concurrency",
                "running",
                "rate",
                "started",
                "set_by",
                "key_concurrency",
                "key_rate",
                "type_rates",
                "type_started",
            )
        ),
    }
    assert [
        claimed.id.hex for claimed in await store.claim(5, LEASE, "mail", types=TEST_TYPES)
    ] == [job["id"].replace("-", "")]


async def test_the_queue_list_counts_live_and_held_jobs_and_shows_pauses(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    await _submit(client, queue="a")
    await _submit(client, queue="a")
    await _submit(client, queue="a", delay="1h")
    await _submit(client, queue="b")
    await PostgresJobStore(engine).claim(1, LEASE, "b", types=TEST_TYPES)
    await client.post("/queues/idle/pause")

    response = await client.get("/queues")

    assert response.status_code == 200, response.text
    queues = {queue["name"]: queue for queue in response.json()["queues"]}
    assert list(queues) == ["a", "b", "idle"]
    a = queues["a"]
    assert a["jobs"] == {"waiting": 0, "pending": 3, "processing": 0, "dead_letter": 0}
    assert (a["due"], a["scheduled"], a["paused"]) == (2, 1, False)
    assert 0 <= a["oldest_due_age_seconds"] < 60
    assert queues["b"]["jobs"]["processing"] == 1
    assert queues["b"]["oldest_due_age_seconds"] is None
    assert queues["idle"]["paused"] is True
    assert sum(queues["idle"]["jobs"].values()) == 0


@pytest.mark.parametrize("name", ["bad name", "-starts-with-a-dash", "x" * 65, "caf%C3%A9"])
async def test_a_bad_queue_name_is_a_400_and_pauses_nothing(
    client: AsyncTestClient[Any], name: str
) -> None:
    response = await client.post(f"/queues/{name}/pause")

    assert response.status_code == 400, response.text
    assert "queue name" in response.json()["error"]
    assert (await client.get("/queues")).json() == {"queues": []}


async def test_the_queue_routes_are_in_the_openapi_document(client: AsyncTestClient[Any]) -> None:
    paths = (await client.get("/schema/openapi.json")).json()["paths"]

    assert set(paths["/queues"]) == {"get"}
    assert set(paths["/queues/{name}/pause"]) == {"post"}
    assert set(paths["/queues/{name}/resume"]) == {"post"}
    assert "400" in paths["/queues/{name}/pause"]["post"]["responses"]
