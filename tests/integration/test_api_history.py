"""A job's attempts over HTTP, run by a real pool on PostgreSQL: retried three times,
dead-lettered, retried by hand, then completed, and every attempt is in its record."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.entrypoints.config.settings import Settings
from tests.support.api import build_api
from tests.support.gated_jobs import Gate, handlers_for, wait_for_status

RFC3339_UTC_SUFFIX = "Z"


@pytest.fixture
def gate() -> Gate:
    return Gate()


@pytest.fixture
async def client(
    engine: AsyncEngine, database_url: str, gate: Gate
) -> AsyncIterator[AsyncTestClient[Any]]:
    settings = Settings(
        backoff_base=timedelta(milliseconds=10), backoff_max=timedelta(milliseconds=40)
    )
    api = build_api(database_url, settings=settings, handlers=handlers_for(gate), with_pool=True)
    async with AsyncTestClient(app=api.app) as client:
        yield client


async def test_every_attempt_of_a_job_retried_dead_lettered_and_retried_by_hand_is_shown(
    client: AsyncTestClient[Any], gate: Gate
) -> None:
    created = (await client.post("/jobs", json={"type": "gated", "max_attempts": 4})).json()
    assert created["history"] == []
    assert (created["started_at"], created["finished_at"], created["locked_until"]) == (
        None,
        None,
        None,
    )
    await wait_for_status(client, created["id"], "dead_letter")
    dead = (await client.get(f"/jobs/{created['id']}")).json()
    assert dead["finished_at"] == dead["updated_at"]
    gate.open = True
    assert (await client.post(f"/jobs/{created['id']}/retry")).status_code == 200
    await wait_for_status(client, created["id"], "completed")

    record = (await client.get(f"/jobs/{created['id']}")).json()

    history = record["history"]
    assert [(a["attempt"], a["outcome"]) for a in history] == [
        (1, "retried"),
        (2, "retried"),
        (3, "retried"),
        (4, "dead_letter"),
        (1, "completed"),
    ]
    assert all("gate closed" in a["error"] for a in history[:4])
    assert history[-1]["error"] is None
    for attempt in history:
        assert attempt["started_at"].endswith(RFC3339_UTC_SUFFIX)
        assert attempt["finished_at"].endswith(RFC3339_UTC_SUFFIX)
        started = datetime.fromisoformat(attempt["started_at"])
        assert started <= datetime.fromisoformat(attempt["finished_at"])
        # host:pid of this process, which runs the pool.
        assert attempt["worker"].rsplit(":", 1)[1].isdigit()
    assert record["finished_at"] == record["updated_at"] == history[-1]["finished_at"]
    assert record["started_at"] == history[-1]["started_at"]
    assert record["locked_until"] is None
