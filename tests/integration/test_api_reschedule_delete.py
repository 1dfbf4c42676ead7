"""An operator's actions on one pending or ended job over HTTP: reschedule it, run it now,
delete it; and the answers for jobs they cannot act on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text
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


async def _submit(client: AsyncTestClient[Any], **fields: Any) -> str:
    body = {"type": "sleep", "payload": {"duration": "1ms"}, **fields}
    response = await client.post("/jobs", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def _database_now(engine: AsyncEngine) -> datetime:
    async with engine.connect() as conn:
        now: datetime = (await conn.execute(text("SELECT now()"))).scalar_one()
    return now


async def test_a_scheduled_job_is_rescheduled_then_run_now(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    job = await _submit(client, delay="1h", max_attempts=7)
    store = PostgresJobStore(engine)
    assert await store.claim(5, LEASE, types=TEST_TYPES) == []

    later = await client.post(f"/jobs/{job}/reschedule", json={"delay": "2h"})
    assert later.status_code == 200, later.text
    due = datetime.fromisoformat(later.json()["run_at"])
    now = await _database_now(engine)
    assert now + timedelta(hours=2) - timedelta(minutes=1) < due <= now + timedelta(hours=2)

    instant = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    moved = await client.post(f"/jobs/{job}/reschedule", json={"run_at": "2030-01-02T03:04:05Z"})
    assert datetime.fromisoformat(moved.json()["run_at"]) == instant
    assert await store.claim(5, LEASE, types=TEST_TYPES) == []

    ran = await client.post(f"/jobs/{job}/run-now")
    assert ran.status_code == 200, ran.text
    body = ran.json()
    assert (body["status"], body["attempts"], body["max_attempts"]) == ("pending", 0, 7)
    assert datetime.fromisoformat(body["run_at"]) <= await _database_now(engine)
    (claimed,) = await store.claim(5, LEASE, types=TEST_TYPES)
    assert str(claimed.id) == job


async def test_a_job_waiting_out_a_backoff_runs_now_with_its_attempts_kept(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    store = PostgresJobStore(engine)
    job = await _submit(client)
    (claimed,) = await store.claim(1, LEASE, types=TEST_TYPES)
    await record(store, claimed.lease, Decision.backoff(timedelta(hours=1), "flaky"))

    body = (await client.post(f"/jobs/{job}/run-now")).json()

    assert (body["status"], body["attempts"], body["last_error"]) == ("pending", 1, "flaky")
    (again,) = await store.claim(1, LEASE, types=TEST_TYPES)
    assert again.attempts == 2


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"", "request body is empty"),
        (b"{}", "give run_at or delay"),
        (b'{"delay": "1m", "run_at": "2030-01-01T00:00:00Z"}', "give run_at or delay"),
        (b'{"delay": "soon"}', "delay"),
        (b'{"delay": "-5m"}', "delay"),
        (b'{"delay": "99999h"}', "delay must be between 0 and 3650 days"),
        (b'{"run_at": "2030-01-01T00:00:00"}', "run_at"),
        (b'{"when": "now"}', "when"),
        (b"[1]", "invalid request body"),
    ],
)
async def test_a_bad_reschedule_is_a_400_that_moves_nothing(
    client: AsyncTestClient[Any], body: bytes, says: str
) -> None:
    job = await _submit(client, delay="1h")
    before = (await client.get(f"/jobs/{job}")).json()

    response = await client.post(
        f"/jobs/{job}/reschedule", content=body, headers={"content-type": "application/json"}
    )

    assert response.status_code == 400, response.text
    assert says in response.json()["error"]
    assert (await client.get(f"/jobs/{job}")).json() == before


async def test_only_a_pending_job_is_rescheduled_or_run_now(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    store = PostgresJobStore(engine)
    running = await _submit(client)
    await store.claim(1, LEASE, types=TEST_TYPES)

    for path, body in (("run-now", None), ("reschedule", {"delay": "1m"})):
        refused = await client.post(f"/jobs/{running}/{path}", json=body)
        assert refused.status_code == 409, refused.text
        assert "only pending jobs can be rescheduled" in refused.json()["error"]
        missing = await client.post(f"/jobs/{uuid4()}/{path}", json=body)
        assert missing.status_code == 404
        malformed = await client.post(f"/jobs/not-an-id/{path}", json=body)
        assert malformed.status_code == 400
    assert (await client.get(f"/jobs/{running}")).json()["status"] == "processing"


async def test_a_job_is_deleted_in_any_status_but_processing(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    store = PostgresJobStore(engine)
    running = await _submit(client)
    (claimed,) = await store.claim(1, LEASE, types=TEST_TYPES)
    waiting = await _submit(client, delay="1h")

    refused = await client.delete(f"/jobs/{running}")
    assert refused.status_code == 409, refused.text
    assert "cancel it first" in refused.json()["error"]
    assert (await client.get(f"/jobs/{running}")).status_code == 200

    await record(store, claimed.lease, Decision.dead_letter("gave up"))
    for job, status in ((running, "dead_letter"), (waiting, "pending")):
        deleted = await client.delete(f"/jobs/{job}")
        assert deleted.status_code == 200, deleted.text
        assert (deleted.json()["id"], deleted.json()["status"]) == (job, status)
        assert (await client.get(f"/jobs/{job}")).status_code == 404
        assert (await client.delete(f"/jobs/{job}")).status_code == 404
    assert (await client.delete("/jobs/not-an-id")).status_code == 400


async def test_deleting_a_unique_job_frees_its_key(client: AsyncTestClient[Any]) -> None:
    unique = {"unique": {"key": "nightly-report"}, "delay": "1h"}
    first = await _submit(client, **unique)
    duplicate = await client.post(
        "/jobs", json={"type": "sleep", "payload": {"duration": "1ms"}, **unique}
    )
    assert (duplicate.status_code, duplicate.json()["id"]) == (200, first)

    assert (await client.delete(f"/jobs/{first}")).status_code == 200

    second = await _submit(client, **unique)
    assert second != first
