"""Retrying one failed job, and retrying or discarding many at once, over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.job import NewJob
from jobqueue.domain.outcome import Decision
from jobqueue.domain.ports import JobStore
from tests.fakes import TEST_TYPES
from tests.support.api import build_api
from tests.support.endings import record

LEASE = timedelta(minutes=5)


@pytest.fixture
async def client(engine: AsyncEngine, database_url: str) -> AsyncIterator[AsyncTestClient[Any]]:
    async with AsyncTestClient(app=build_api(database_url).app) as client:
        yield client


async def _ended(store: JobStore, decision: Decision, queue: str = "default") -> str:
    new = NewJob(type="sleep", max_attempts=3, payload={"duration": "1ms"}, queue=queue)
    job = (await store.submit(new)).job
    (claimed,) = await store.claim(1, LEASE, queue, types=TEST_TYPES)
    await record(store, claimed.lease, decision)
    return str(job.id)


async def test_a_failed_job_is_retried_like_a_dead_letter(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    failed = await _ended(PostgresJobStore(engine), Decision.fail("bad input"))

    response = await client.post(f"/jobs/{failed}/retry")

    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["status"], body["attempts"]) == ("pending", 0)
    assert [(a["outcome"], a["error"]) for a in body["history"]] == [("failed", "bad input")]


async def test_retry_and_discard_by_filter_act_on_the_oldest_up_to_the_limit(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    store = PostgresJobStore(engine)
    mail = [await _ended(store, Decision.dead_letter("smtp down"), "mail") for _ in range(3)]
    other = await _ended(store, Decision.dead_letter("x"), "other")

    retried = await client.post(
        "/jobs/retry", json={"status": "dead_letter", "queue": "mail", "limit": 2}
    )

    assert retried.status_code == 200, retried.text
    assert retried.json() == {"retried": 2}
    statuses = [(await client.get(f"/jobs/{job}")).json()["status"] for job in mail]
    assert statuses == ["pending", "pending", "dead_letter"]

    discarded = await client.post("/jobs/discard", json={"status": "dead_letter"})

    assert discarded.json() == {"discarded": 2}
    assert (await client.get(f"/jobs/{mail[2]}")).status_code == 404
    assert (await client.get(f"/jobs/{other}")).status_code == 404
    assert (await client.get(f"/jobs/{mail[0]}")).status_code == 200


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "Object missing required field `status`"),
        (
            {"status": "completed"},
            "status must be cancelled or dead_letter or failed, got 'completed'",
        ),
        ({"status": "sleeping"}, "Invalid enum value 'sleeping'"),
        ({"status": "failed", "limit": 0}, "Expected `int` >= 1"),
        ({"status": "failed", "limit": 1001}, "Expected `int` <= 1000"),
        ({"status": "failed", "queue": "no spaces"}, "matching regex"),
        ({"status": "failed", "colour": "red"}, "unknown field `colour`"),
        ({"status": "failed", "type": ""}, "Expected `str` of length >= 1 - at `$.type`"),
    ],
)
async def test_a_bad_filter_is_a_400_and_touches_nothing(
    client: AsyncTestClient[Any], engine: AsyncEngine, body: dict[str, Any], message: str
) -> None:
    failed = await _ended(PostgresJobStore(engine), Decision.fail("bad input"))

    for path in ("/jobs/retry", "/jobs/discard"):
        response = await client.post(path, json=body)
        assert response.status_code == 400, response.text
        assert message in response.json()["error"]
    assert (await client.get(f"/jobs/{failed}")).json()["status"] == "failed"


async def test_an_empty_bulk_body_says_what_to_send(client: AsyncTestClient[Any]) -> None:
    response = await client.post("/jobs/retry", content=b"")

    assert response.status_code == 400
    assert '"status": "dead_letter"' in response.json()["error"]
