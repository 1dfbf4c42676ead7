"""Graphs and workflows through the API: a batch whose jobs name each other is stored as
a workflow in one request (or refused whole with a 400 saying why, storing nothing), a
callback runs after every job whatever their outcomes, a single job may wait for stored
jobs, and `/workflows/{id}` shows, cancels and retries the workflow."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any
from uuid import uuid4

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.outcome import Decision
from tests.support.api import build_api
from tests.support.endings import record

LEASE = timedelta(minutes=5)
SLEEP = {"type": "sleep", "payload": {"duration": "1ms"}}


@pytest.fixture
async def client(engine: AsyncEngine, database_url: str) -> AsyncIterator[AsyncTestClient[Any]]:
    async with AsyncTestClient(app=build_api(database_url).app) as client:
        yield client


async def _count(engine: AsyncEngine) -> int:
    async with engine.connect() as connection:
        return int((await connection.execute(text("SELECT count(*) FROM jobs"))).scalar_one())


async def _end_next(engine: AsyncEngine, decision: Decision) -> str:
    store = PostgresJobStore(engine)
    (claimed,) = await store.claim(1, LEASE, types=["sleep"])
    await record(store, claimed.lease, decision)
    return str(claimed.id)


async def test_a_batch_graph_is_a_workflow_and_its_callback_sees_every_outcome(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    body = {
        "jobs": [
            {**SLEEP, "name": "fetch"},
            {**SLEEP, "name": "parse", "depends_on": ["fetch"]},
            {**SLEEP, "depends_on": ["0", "parse"]},
        ],
        "callback": {**SLEEP, "payload": {"duration": "2ms"}},
    }
    response = await client.post("/jobs/batch", json=body)
    assert response.status_code == 201, response.text
    answer = response.json()
    fetch, parse, last = answer["jobs"]
    callback = answer["callback"]
    assert [fetch["status"], parse["status"], last["status"]] == ["pending", "waiting", "waiting"]
    assert parse["depends_on"] == [fetch["id"]]
    assert last["depends_on"] == [fetch["id"], parse["id"]]
    assert (callback["status"], callback["run_anyway"], callback["waiting_for"]) == (
        "waiting",
        True,
        3,
    )
    workflow = answer["workflow_id"]
    assert {job["workflow_id"] for job in (fetch, parse, last, callback)} == {workflow}

    assert await _end_next(engine, Decision.complete('"page"')) == fetch["id"]
    assert await _end_next(engine, Decision.fail("unparsable")) == parse["id"]
    shown = (await client.get(f"/workflows/{workflow}")).json()
    assert [job["id"] for job in shown["jobs"]] == [
        fetch["id"],
        parse["id"],
        last["id"],
        callback["id"],
    ]
    assert shown["counts"] == {"pending": 1, "completed": 1, "failed": 1, "cancelled": 1}
    assert shown["ended"] is False
    assert shown["jobs"][2]["last_error"] == f"job {parse['id']} it depends on ended failed"
    # The callback runs: every job of the batch ended.
    assert await _end_next(engine, Decision.complete()) == callback["id"]
    assert (await client.get(f"/workflows/{workflow}")).json()["ended"] is True


@pytest.mark.parametrize(
    ("jobs", "message"),
    [
        (
            [
                {**SLEEP, "name": "a", "depends_on": ["b"]},
                {**SLEEP, "name": "b", "depends_on": ["a"]},
            ],
            "depends_on makes a cycle, so none of these jobs could ever start: a -> b -> a",
        ),
        ([{**SLEEP, "depends_on": ["nobody"]}], "depends_on names 'nobody'"),
        ([{**SLEEP, "depends_on": [str(uuid4())]}], "which is neither a job of this submission"),
        ([{**SLEEP, "depends_on": ["7"]}], "depends_on names 'jobs[7]'"),
        ([{**SLEEP, "name": "x"}, {**SLEEP, "name": "x"}], "two jobs of this submission"),
        ([{**SLEEP, "name": "k", "idempotency_key": "k-1"}], "takes no Idempotency-Key"),
        ([{**SLEEP, "depends_on": [""]}], "Expected `str` of length >= 1"),
    ],
)
async def test_a_graph_that_cannot_run_is_a_400_that_stores_nothing(
    client: AsyncTestClient[Any], engine: AsyncEngine, jobs: list[Any], message: str
) -> None:
    response = await client.post("/jobs/batch", json={"jobs": jobs})

    assert response.status_code == 400, response.text
    assert message in response.json()["error"]
    assert await _count(engine) == 0


async def test_a_job_may_wait_for_stored_jobs_and_a_failed_one_refuses_it(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    first = (await client.post("/jobs", json=SLEEP)).json()
    waiting = await client.post("/jobs", json={**SLEEP, "depends_on": [first["id"]]})
    assert waiting.status_code == 201, waiting.text
    assert (waiting.json()["status"], waiting.json()["waiting_for"]) == ("waiting", 1)
    await _end_next(engine, Decision.fail("no"))
    assert (await client.get(f"/jobs/{waiting.json()['id']}")).json()["status"] == "cancelled"

    refused = await client.post("/jobs", json={**SLEEP, "depends_on": [first["id"]]})
    assert refused.status_code == 400
    assert f"job {first['id']} it depends on is failed" in refused.json()["error"]
    anyway = await client.post(
        "/jobs", json={**SLEEP, "depends_on": [first["id"]], "run_anyway": True}
    )
    assert anyway.json()["status"] == "pending"


async def test_a_workflow_is_cancelled_and_retried_through_the_api(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    answer = (
        await client.post(
            "/jobs/batch",
            json={"jobs": [{**SLEEP, "name": "a"}, {**SLEEP, "depends_on": ["a"]}]},
        )
    ).json()
    workflow = answer["workflow_id"]
    cancelled = await client.post(f"/workflows/{workflow}/cancel")
    assert cancelled.json() == {"id": workflow, "count": 2}
    retried = await client.post(f"/workflows/{workflow}/retry")
    assert retried.json() == {"id": workflow, "count": 2}
    shown = (await client.get(f"/workflows/{workflow}")).json()
    assert [job["status"] for job in shown["jobs"]] == ["pending", "waiting"]

    for path in (f"/workflows/{uuid4()}", f"/workflows/{uuid4()}/retry"):
        call = client.get if "retry" not in path else client.post
        missing = await call(path)
        assert missing.status_code == 404
        assert "no workflow" in missing.json()["error"]
    bad = await client.get("/workflows/not-a-uuid")
    assert bad.status_code == 400
    assert bad.json() == {"error": "workflow id must be a UUID, got 'not-a-uuid'"}


async def test_a_callback_of_more_jobs_than_it_may_wait_for_is_a_400(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    body = {"jobs": [SLEEP] * 1_001, "callback": SLEEP}
    response = await client.post("/jobs/batch", json=body)

    assert response.status_code == 400, response.text
    assert response.json() == {
        "error": "callback: a callback waits for every job of its batch, at most 1,000; "
        "this batch has 1,001"
    }
    assert await _count(engine) == 0
