"""`/queues/{name}/limits` and partition keys over HTTP: a queue's limits set, shown with
their use and lifted; a job's key given or made from its type's fields, shown in its
record; a bad limit or key answered 400 saying why, storing nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.store import PostgresJobStore
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
        "type_rates": None,
        "type_started": None,
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


async def test_type_rates_are_set_shown_with_their_starts_and_lifted(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    answer = await client.put(
        "/queues/texts/limits",
        json={"concurrency": 5, "type_rates": {"sleep": "3/1m", "send_sms": " 10 / s "}},
    )
    assert answer.status_code == 200, answer.text
    limits = answer.json()["limits"]
    assert (limits["concurrency"], limits["set_by"]) == (5, "operator")
    assert (limits["key_concurrency"], limits["key_rate"]) == (None, None)
    # In type order, each with its starts within its window now.
    assert list(limits["type_rates"].items()) == [("send_sms", "10/s"), ("sleep", "3/m")]
    assert limits["type_started"] == {"send_sms": 0, "sleep": 0}

    for _ in range(2):
        submitted = await client.post(
            "/jobs", json={"type": "sleep", "payload": {"duration": "1ms"}, "queue": "texts"}
        )
        assert submitted.status_code == 201, submitted.text
    claimed = await PostgresJobStore(engine).claim(
        5, timedelta(minutes=1), "texts", types={"sleep"}
    )
    assert len(claimed) == 2
    listed = {queue["name"]: queue for queue in (await client.get("/queues")).json()["queues"]}
    assert listed["texts"]["limits"]["type_rates"] == {"send_sms": "10/s", "sleep": "3/m"}
    assert listed["texts"]["limits"]["type_started"] == {"send_sms": 0, "sleep": 2}

    # The body replaces every limit: one type's rate alone is left.
    alone = await client.put("/queues/texts/limits", json={"type_rates": {"send_sms": "2/s"}})
    assert alone.status_code == 200, alone.text
    assert {name: value for name, value in alone.json()["limits"].items() if value is not None} == {
        "set_by": "operator",
        "type_rates": {"send_sms": "2/s"},
        "type_started": {"send_sms": 0},
    }

    # An empty object rates no type.
    unrated = await client.put("/queues/texts/limits", json={"concurrency": 2, "type_rates": {}})
    assert unrated.status_code == 200, unrated.text
    assert (unrated.json()["limits"]["type_rates"], unrated.json()["limits"]["type_started"]) == (
        None,
        None,
    )
    await client.put("/queues/texts/limits", json={"type_rates": {"send_sms": "2/s"}})
    lifted = await client.delete("/queues/texts/limits")
    assert lifted.status_code == 200, lifted.text
    assert (lifted.json()["limits"]["type_rates"], lifted.json()["limits"]["type_started"]) == (
        None,
        None,
    )


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (
            {"type_rates": {"sms": "fast"}},
            "invalid limits: type_rates: type 'sms': a rate is starts per period",
        ),
        (
            {"type_rates": {"fax": "1/s", "sms": "0/1m"}},
            "invalid limits: type_rates: type 'sms': a rate limit must be between 1 and",
        ),
        ({"type_rates": {"sms": "5/2d"}}, "type_rates: type 'sms': invalid duration '2d'"),
        ({"type_rates": {"sms": "5/25h"}}, "type 'sms': a rate's period must be between"),
        ({"type_rates": {"": "1/s"}}, "type_rates: a type rate names a job type (1 to 200"),
        ({"type_rates": {" ": "1/s"}}, "type_rates: a type rate names a job type (1 to 200"),
        ({"type_rates": {"x" * 201: "1/s"}}, "type_rates: a type rate names a job type"),
        # No job type holds a NUL: refused, not handed to the database to fail on.
        ({"type_rates": {"a\u0000b": "1/s"}}, "a job type (1 to 200 characters, without NUL)"),
        (
            {"type_rates": {f"t{n}": "1/s" for n in range(51)}},
            "invalid limits: type_rates: at most 50 types of a queue have rates, got 51",
        ),
        # Counted before any is parsed: a body may name any number of them.
        ({"type_rates": {f"t{n}": "fast" for n in range(5000)}}, "rates, got 5000"),
        (
            {"type_rates": {"sms": "1/s"}, "key_concurrency": 2},
            "invalid limits: rates per job type cannot be combined with limits per partition "
            "key in one queue; give the rated type a queue of its own",
        ),
        (
            {"type_rates": {"sms": "1/s"}, "key_rate": "1/s"},
            "rates per job type cannot be combined with limits per partition key",
        ),
        ({"type_rates": {"sms": 10}}, "at `$.type_rates[...]`"),
        ({"type_rates": ["sms:1/s"]}, "at `$.type_rates`"),
        ({"type_rates": "sms:1/s"}, "at `$.type_rates`"),
        ({"type_rate": {"sms": "1/s"}}, "type_rate"),
    ],
)
async def test_a_bad_type_rate_is_refused_naming_it_and_changes_nothing(
    client: AsyncTestClient[Any], body: dict[str, Any], says: str
) -> None:
    await client.put("/queues/texts/limits", json={"concurrency": 3, "type_rates": {"sms": "4/s"}})
    answer = await client.put("/queues/texts/limits", json=body)
    assert answer.status_code == 400, answer.text
    assert says in answer.json()["error"]
    listed = {queue["name"]: queue for queue in (await client.get("/queues")).json()["queues"]}
    limits = listed["texts"]["limits"]
    assert (limits["concurrency"], limits["type_rates"]) == (3, {"sms": "4/s"})


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
