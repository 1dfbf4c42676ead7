"""Scheduled jobs over HTTP: `run_at` and `delay` at submission, refusals, and a pool
that starts a scheduled job no earlier than its time (by the database's clock)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.status import Status
from tests.support.api import FAST_POOL, build_api, eventually
from tests.support.job_rows import count_jobs, read_row

SLEEP = {"duration": "10ms"}


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text)


@pytest.fixture
async def client(engine: AsyncEngine, database_url: str) -> AsyncIterator[AsyncTestClient[Any]]:
    async with AsyncTestClient(app=build_api(database_url).app) as client:
        yield client


async def test_a_delay_schedules_the_job_that_long_after_it_is_stored(
    client: AsyncTestClient[Any],
) -> None:
    response = await client.post(
        "/jobs", json={"type": "sleep", "payload": SLEEP, "delay": "1h30m"}
    )

    assert response.status_code == 201, response.text
    body = response.json()
    assert body["status"] == "pending"
    assert instant(body["run_at"]) - instant(body["created_at"]) == timedelta(hours=1, minutes=30)
    assert (await client.get(f"/jobs/{body['id']}")).json()["run_at"] == body["run_at"]


async def test_run_at_is_an_instant_kept_whatever_offset_it_was_given_in(
    client: AsyncTestClient[Any],
) -> None:
    response = await client.post(
        "/jobs", json={"type": "sleep", "payload": SLEEP, "run_at": "2031-01-01T00:00:00.25+02:00"}
    )

    assert response.status_code == 201, response.text
    assert response.json()["run_at"] == "2030-12-31T22:00:00.250000Z"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"run_at": "2031-01-01T00:00:00Z", "delay": "1s"}, "give run_at or delay, not both"),
        ({"delay": "soon"}, "delay: invalid duration 'soon'"),
        ({"delay": "-5s"}, "durations cannot be negative"),
        ({"delay": "87601h"}, "delay must be between 0 and 3650 days"),
        ({"delay": 30}, "Expected `str`, got `int` - at `$.delay`"),
        ({"run_at": "2031-01-01T00:00:00"}, "Expected `datetime` with a timezone component"),
        ({"run_at": "tomorrow"}, "Invalid RFC3339 encoded datetime - at `$.run_at`"),
        ({"run_at": None}, "Expected `datetime`, got `null` - at `$.run_at`"),
    ],
)
async def test_a_bad_schedule_is_a_400_saying_what_to_change_and_stores_nothing(
    client: AsyncTestClient[Any], engine: AsyncEngine, fields: dict[str, Any], message: str
) -> None:
    response = await client.post("/jobs", json={"type": "sleep", "payload": SLEEP, **fields})

    assert response.status_code == 400, response.text
    assert message in response.json()["error"]
    assert await count_jobs(engine) == 0


async def test_a_job_scheduled_ahead_starts_no_earlier_and_soon_after(
    engine: AsyncEngine, database_url: str
) -> None:
    release = threading.Event()
    registry = Registry()

    @registry.handler("held")
    async def held(ctx: JobContext, payload: Any) -> None:
        # The app runs on the test client's own loop and thread: a thread-safe event.
        await asyncio.to_thread(release.wait, 30)

    api = build_api(database_url, handlers=registry, with_pool=True)
    async with AsyncTestClient(app=api.app) as client:
        response = await client.post("/jobs", json={"type": "held", "delay": "2s"})
        assert response.status_code == 201, response.text
        job_id = UUID(response.json()["id"])

        async def row() -> dict[str, Any]:
            found = await read_row(engine, job_id)
            assert found is not None
            return found

        try:
            running = await eventually(row, lambda r: r["status"] == Status.PROCESSING, within=15)
        finally:
            release.set()
        # The claim stamped updated_at with the database's clock, as the delay was counted.
        started_after_due = running["updated_at"] - running["run_at"]
        assert running["run_at"] - running["created_at"] == timedelta(seconds=2)
        assert started_after_due >= timedelta(0)
        # Idle, the pool looks again every poll interval: a second covers any scheduling.
        assert started_after_due <= FAST_POOL.poll_interval + timedelta(seconds=1)
        await eventually(row, lambda r: r["status"] == Status.COMPLETED)
