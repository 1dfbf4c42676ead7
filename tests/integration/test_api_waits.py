"""`GET /jobs/{id}/wait` through the API: an ended job's record with its result at once, a
live one's when the timeout passes, and a 400 or 404 for what it cannot wait for. (Waits
woken by the database across processes: test_wait_processes.py.)"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any
from uuid import uuid4

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.outcome import Decision
from tests.fakes import TEST_TYPES
from tests.support.api import build_api
from tests.support.endings import record

LEASE = timedelta(minutes=5)


@pytest.fixture
async def client(engine: AsyncEngine, database_url: str) -> AsyncIterator[AsyncTestClient[Any]]:
    async with AsyncTestClient(app=build_api(database_url).app) as client:
        yield client


async def _submit(client: AsyncTestClient[Any]) -> str:
    response = await client.post("/jobs", json={"type": "sleep", "payload": {"duration": "1ms"}})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def test_an_ended_job_is_answered_at_once_with_its_result(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    job = await _submit(client)
    store = PostgresJobStore(engine)
    (claimed,) = await store.claim(1, LEASE, types=TEST_TYPES)
    await record(store, claimed.lease, Decision.complete('{"rows": [1, 2], "note": "<b>"}'))

    response = await client.get(f"/jobs/{job}/wait", params={"timeout": "1m"})

    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["status"], body["result"]) == ("completed", {"rows": [1, 2], "note": "<b>"})
    # The record is the one GET /jobs/{id} answers; a page leaves the result out.
    assert (await client.get(f"/jobs/{job}")).json() == body
    listed = (await client.get("/jobs", params={"status": "completed"})).json()["jobs"]
    assert [(each["id"], each["result"]) for each in listed] == [(job, None)]


async def test_a_live_job_is_answered_as_it_is_when_the_timeout_passes(
    client: AsyncTestClient[Any],
) -> None:
    job = await _submit(client)

    response = await client.get(f"/jobs/{job}/wait", params={"timeout": "100ms"})

    assert response.status_code == 200, response.text
    assert response.json()["status"] == "pending"


@pytest.mark.parametrize(
    ("sent", "message"),
    [
        ("soon", "timeout: invalid duration 'soon'"),
        ("-1s", "durations cannot be negative"),
        ("61s", "timeout: at most 1m, got '61s'"),
        ("1h", "at most 1m"),
    ],
)
async def test_a_timeout_that_is_no_duration_up_to_a_minute_is_a_400(
    client: AsyncTestClient[Any], sent: str, message: str
) -> None:
    job = await _submit(client)

    response = await client.get(f"/jobs/{job}/wait", params={"timeout": sent})

    assert response.status_code == 400
    assert message in response.json()["error"]


async def test_an_unknown_job_is_a_404_and_a_bad_id_a_400(client: AsyncTestClient[Any]) -> None:
    unknown = await client.get(f"/jobs/{uuid4()}/wait", params={"timeout": "1s"})
    bad = await client.get("/jobs/not-a-uuid/wait")

    assert unknown.status_code == 404
    assert "error" in unknown.json()
    assert bad.status_code == 400
    assert "must be a UUID" in bad.json()["error"]
