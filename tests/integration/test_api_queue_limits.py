"""`/queues/{name}/limits` and partition keys over HTTP: a queue's limits set, shown with
their use and lifted; a job's key given or made from its type's fields, shown in its
record; a bad limit or key answered 400 saying why, storing nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.api import build_api


@pytest.fixture
async def client(engine: AsyncEngine, database_url: str) -> AsyncIterator[AsyncTestClient[Any]]:
    async with AsyncTestClient(app=build_api(database_url).app) as client:
        yield client


async def test_per_key_limits_are_set_shown_and_lifted(client: AsyncTestClient[Any]) -> None:
    answer = await client.put(
        "/queues/reports/limits",
        json={"concurrency": 4, "key_concurrency": 2, "key_rate": "10/1m"},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["limits"] == {
        "concurrency": 4,
        "running": 0,
        "rate": None,
        "started": None,
        "set_by": "operator",
        "key_concurrency": 2,
        "key_rate": "10/m",
    }
    listed = {queue["name"]: queue for queue in (await client.get("/queues")).json()["queues"]}
    assert (
        listed["reports"]["limits"]["key_concurrency"],
        listed["reports"]["limits"]["key_rate"],
    ) == (2, "10/m")

    # A key rate alone is a limit of its own; the body replaces the others.
    alone = await client.put("/queues/reports/limits", json={"key_rate": " 2 / 500ms "})
    assert alone.status_code == 200, alone.text
    assert {name: value for name, value in alone.json()["limits"].items() if value is not None} == {
        "set_by": "operator",
        "key_rate": "2/500ms",
    }

    lifted = await client.delete("/queues/reports/limits")
    assert lifted.status_code == 200, lifted.text
    assert lifted.json()["limits"]["key_concurrency"] is None
    assert lifted.json()["limits"]["key_rate"] is None


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"key_concurrency": 0}, "key_concurrency"),
        ({"key_concurrency": "two"}, "key_concurrency"),
        ({"key_concurrency": 10_001}, "key_concurrency"),
        ({"key_rate": "fast"}, "invalid limits: key_rate: a rate is starts per period"),
        ({"key_rate": "0/1m"}, "invalid limits: key_rate: a rate limit must be between 1 and"),
        ({"key_rate": "5/2d"}, "invalid limits: key_rate: invalid duration '2d'"),
        ({"key_rate": "5/25h"}, "invalid limits: key_rate: a rate's period must be between"),
        ({"key_rate": 10}, "at `$.key_rate`"),
        ({"key_rates": "10/1m"}, "key_rates"),
        # Which of the two rates is wrong is named.
        ({"rate": "0/1m", "key_rate": "10/1m"}, "invalid limits: rate: a rate limit must be"),
    ],
)
async def test_a_bad_per_key_limit_is_refused_and_changes_nothing(
    client: AsyncTestClient[Any], body: dict[str, Any], says: str
) -> None:
    await client.put("/queues/reports/limits", json={"key_concurrency": 3, "key_rate": "4/s"})
    answer = await client.put("/queues/reports/limits", json=body)
    assert answer.status_code == 400, answer.text
    assert says in answer.json()["error"]
    listed = {queue["name"]: queue for queue in (await client.get("/queues")).json()["queues"]}
    limits = listed["reports"]["limits"]
    assert (limits["key_concurrency"], limits["key_rate"]) == (3, "4/s")


async def test_a_job_s_partition_key_is_stored_and_shown(client: AsyncTestClient[Any]) -> None:
    answer = await client.post(
        "/jobs",
        json={"type": "sleep", "payload": {"duration": "1ms"}, "partition_key": "tenant-42"},
    )
    assert answer.status_code == 201, answer.text
    job = answer.json()
    assert job["partition_key"] == "tenant-42"
    shown = await client.get(f"/jobs/{job['id']}")
    assert shown.json()["partition_key"] == "tenant-42"


@pytest.mark.parametrize("key", ["", "x" * 256, 7, None])
async def test_a_bad_partition_key_is_refused_and_stores_nothing(
    client: AsyncTestClient[Any], key: object
) -> None:
    answer = await client.post(
        "/jobs", json={"type": "sleep", "payload": {"duration": "1ms"}, "partition_key": key}
    )
    assert answer.status_code == 400, answer.text
    assert "partition_key" in answer.json()["error"]
    assert (await client.get("/jobs", params={"status": "pending"})).json()["jobs"] == []
