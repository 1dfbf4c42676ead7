"""Unique jobs on PostgreSQL: concurrent duplicates are decided by the unique index (one
job, every other submission answered with it), in every write path: a single insert, a
bulk insert (duplicates within one call too) and the caller's own transaction; and over
HTTP, with the `duplicate` flag and the metric."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue import NewJob, Unique, enqueue, enqueue_many
from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.schema import jobs
from jobqueue.adapters.postgres.store import PostgresJobStore
from tests.integration.periodic_handlers import registry
from tests.support.api import build_api

CONCURRENT = 200


async def _count(engine: AsyncEngine) -> int:
    async with engine.connect() as connection:
        return int((await connection.execute(select(func.count()).select_from(jobs))).scalar_one())


async def test_two_hundred_concurrent_submissions_with_one_key_create_one_job(
    database_url: str, engine: AsyncEngine
) -> None:
    busy = create_engine(database_url, pool_size=20)
    try:
        store = PostgresJobStore(busy)
        new = NewJob.build(type="sync", payload={"account": 7}, unique=Unique(by=("account",)))
        submitted = await asyncio.gather(*(store.submit(new) for _ in range(CONCURRENT)))
    finally:
        await busy.dispose()

    assert await _count(engine) == 1
    assert len({each.job.id for each in submitted}) == 1
    assert sum(not each.duplicate for each in submitted) == 1


async def test_duplicates_within_one_bulk_call_and_against_the_table_are_answered(
    engine: AsyncEngine,
) -> None:
    unique = Unique(by=("n",))
    (held,) = await enqueue_many(engine, [NewJob.build(type="t", payload={"n": 1}, unique=unique)])

    batch = [NewJob.build(type="t", payload={"n": n % 3}, unique=unique) for n in range(9)]
    batch.append(NewJob.build(type="t", payload={"n": 1}))  # not unique: always a new job
    submitted = await enqueue_many(engine, batch)

    assert await _count(engine) == 1 + 2 + 1
    by_n = {
        n: {s.job.id for s, new in zip(submitted, batch, strict=True) if new.payload == {"n": n}}
        for n in range(3)
    }
    assert by_n[1] == {held.job.id, submitted[-1].job.id}
    assert len(by_n[0]) == 1
    assert len(by_n[2]) == 1
    assert [s.duplicate for s in submitted[:3]] == [False, True, False]
    assert all(s.duplicate for s in submitted[3:9])


async def test_in_the_callers_transaction_a_duplicate_sees_the_job_it_made(
    engine: AsyncEngine,
) -> None:
    new = NewJob.build(type="t", unique=Unique(key="tx"))
    async with engine.begin() as connection:
        first = await enqueue(connection, new)
        second = await enqueue(connection, new)

    assert (first.duplicate, second.duplicate) == (False, True)
    assert second.job.id == first.job.id
    assert await _count(engine) == 1


@pytest.fixture
async def client(engine: AsyncEngine, database_url: str) -> AsyncIterator[AsyncTestClient[Any]]:
    async with AsyncTestClient(app=build_api(database_url).app) as client:
        yield client


async def test_over_http_a_duplicate_is_a_200_with_the_job_holding_the_key(
    client: AsyncTestClient[Any],
) -> None:
    body = {
        "type": "sleep",
        "payload": {"duration": "1ms"},
        "delay": "1h",
        "unique": {"key": "report-42", "period": "1h"},
    }
    created = await client.post("/jobs", json=body)
    again = await client.post("/jobs", json=body)

    assert created.status_code == 201, created.text
    assert again.status_code == 200, again.text
    assert (created.json()["duplicate"], again.json()["duplicate"]) == (False, True)
    assert again.json()["id"] == created.json()["id"]
    assert again.json()["unique_key"].startswith("report-42@")
    assert "jobs_unique_duplicates_total 1.0" in (await client.get("/metrics")).text


@pytest.mark.parametrize(
    ("unique", "message"),
    [
        ({"states": ["pending"]}, "unique states must include processing"),
        ({"states": ["sleeping"]}, "Invalid enum value 'sleeping'"),
        ({"period": "soon"}, "unique period: invalid duration 'soon'"),
        ({"key": "a", "by": ["x"]}, "not both"),
        ({"by": ["missing"]}, "the payload has no field missing"),
        ({"colour": "red"}, "unknown field `colour`"),
    ],
)
async def test_a_bad_uniqueness_is_a_400(
    client: AsyncTestClient[Any], engine: AsyncEngine, unique: dict[str, Any], message: str
) -> None:
    body = {"type": "sleep", "payload": {"duration": "1ms"}, "unique": unique}
    response = await client.post("/jobs", json=body)

    assert response.status_code == 400, response.text
    assert message in response.json()["error"]
    assert await _count(engine) == 0


async def test_get_periodic_lists_each_periodic_job_with_its_next_slot(
    engine: AsyncEngine, database_url: str
) -> None:
    async with AsyncTestClient(app=build_api(database_url, handlers=registry).app) as client:
        listed = (await client.get("/periodic")).json()
        paths = (await client.get("/schema/openapi.json")).json()["paths"]
        # Once a slot's job is in, the listing says which slot.
        slot = datetime(2026, 12, 4, 12, 0, 5, tzinfo=UTC)
        await PostgresJobStore(engine).insert_slot("tick", slot, NewJob.build(type="tick"))
        after = (await client.get("/periodic")).json()["periodic"][0]

    (tick,) = listed["periodic"]
    assert (tick["name"], tick["type"], tick["cron"], tick["timezone"]) == (
        "tick",
        "tick",
        "* * * * * *",
        "UTC",
    )
    assert tick["next_run_at"].endswith("Z") or tick["next_run_at"].endswith("+00:00")
    assert tick["last_slot_at"] is None
    assert after["last_slot_at"] == "2026-12-04T12:00:05Z"
    assert "/periodic" in paths
