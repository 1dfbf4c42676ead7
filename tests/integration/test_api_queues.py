"""Queues and priorities over HTTP: given at submission, or the job type's handler options."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.domain.registry import JobContext, Registry
from tests.support.api import build_api


def handlers() -> Registry:
    registry = Registry()

    @registry.handler("report", queue="reports", priority=6, max_attempts=2)
    async def report(ctx: JobContext, payload: Any) -> None:
        pass

    return registry


@pytest.fixture
async def client(engine: AsyncEngine, database_url: str) -> AsyncIterator[AsyncTestClient[Any]]:
    async with AsyncTestClient(app=build_api(database_url, handlers=handlers()).app) as client:
        yield client


async def test_a_job_goes_to_the_queue_and_priority_it_is_given(
    client: AsyncTestClient[Any],
) -> None:
    response = await client.post(
        "/jobs",
        json={"type": "sleep", "payload": {"duration": "1ms"}, "queue": "slow.lane", "priority": 9},
    )

    assert response.status_code == 201, response.text
    body = response.json()
    assert (body["queue"], body["priority"]) == ("slow.lane", 9)
    stored = (await client.get(f"/jobs/{body['id']}")).json()
    assert (stored["queue"], stored["priority"]) == ("slow.lane", 9)


async def test_a_job_without_them_gets_its_handler_s_options_else_the_defaults(
    client: AsyncTestClient[Any],
) -> None:
    report = (await client.post("/jobs", json={"type": "report"})).json()
    sleep = await client.post("/jobs", json={"type": "sleep", "payload": {"duration": "1ms"}})
    overridden = await client.post(
        "/jobs", json={"type": "report", "queue": "default", "priority": 0, "max_attempts": 5}
    )

    assert (report["queue"], report["priority"], report["max_attempts"]) == ("reports", 6, 2)
    assert (sleep.json()["queue"], sleep.json()["priority"]) == ("default", 0)
    body = overridden.json()
    assert (body["queue"], body["priority"], body["max_attempts"]) == ("default", 0, 5)
