"""`POST /jobs/batch`: up to 1,000 jobs in one request, stored all together or not at all,
each answered as `POST /jobs` would answer it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.domain.status import Status
from jobqueue.wire.requests import MAX_BATCH_JOBS, BatchJob
from tests.support.api import Api, build_api, metric_value, resolved
from tests.support.job_rows import count_jobs


@pytest.fixture
def api(engine: AsyncEngine, database_url: str) -> Api:
    return build_api(database_url)


@pytest.fixture
async def client(api: Api) -> AsyncIterator[AsyncTestClient[Any]]:
    async with AsyncTestClient(app=api.app) as client:
        yield client


def sleep_job(n: int, **fields: Any) -> dict[str, Any]:
    return {"type": "sleep", "payload": {"duration": f"{n}ms"}, **fields}


async def test_a_batch_of_a_thousand_is_stored_and_answered_in_order(
    client: AsyncTestClient[Any], engine: AsyncEngine, api: Api
) -> None:
    jobs = [sleep_job(n, priority=n % 10) for n in range(MAX_BATCH_JOBS)]

    response = await client.post("/jobs/batch", json={"jobs": jobs})

    assert response.status_code == 201, response.text
    answered = response.json()["jobs"]
    assert [each["payload"] for each in answered] == [job["payload"] for job in jobs]
    assert [each["priority"] for each in answered] == [n % 10 for n in range(MAX_BATCH_JOBS)]
    assert not any(each["replayed"] or each["duplicate"] for each in answered)
    assert len({each["id"] for each in answered}) == MAX_BATCH_JOBS
    assert await count_jobs(engine, Status.PENDING) == MAX_BATCH_JOBS
    read = (await client.get(f"/jobs/{answered[777]['id']}")).json()
    assert read["payload"] == {"duration": "777ms"}
    metrics = (await client.get("/metrics")).text
    assert metric_value(metrics, "jobs_submitted_total") == MAX_BATCH_JOBS


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"jobs": []}, "Expected `array` of length >= 1 - at `$.jobs`"),
        (
            {"jobs": [sleep_job(1)] * (MAX_BATCH_JOBS + 1)},
            f"Expected `array` of length <= {MAX_BATCH_JOBS} - at `$.jobs`",
        ),
        ({"jobs": [sleep_job(1), {"type": "sleep"}]}, "jobs[1]: invalid payload for job type"),
        ({"jobs": [sleep_job(1), {"type": "nope"}]}, "jobs[1]: unknown job type 'nope'"),
        ({"jobs": [sleep_job(1, priority=12)]}, "Expected `int` <= 9 - at `$.jobs[0].priority`"),
        ({"jobs": [sleep_job(1, idempotency_key="")]}, "at `$.jobs[0].idempotency_key`"),
        ({"jobs": [sleep_job(1, urgent=True)]}, "unknown field `urgent` - at `$.jobs[0]`"),
        ({"job": [sleep_job(1)]}, "Object contains unknown field `job`"),
    ],
)
async def test_one_invalid_job_refuses_the_batch_and_stores_none(
    client: AsyncTestClient[Any], engine: AsyncEngine, body: dict[str, Any], expected: str
) -> None:
    many = {"jobs": [sleep_job(n) for n in range(500)] + body["jobs"]} if "jobs" in body else body
    for sent in (body, many) if body.get("jobs") else (body,):
        response = await client.post("/jobs/batch", json=sent)
        assert response.status_code == 400, response.text
        if sent is body:
            assert expected in response.json()["error"], response.json()
    assert await count_jobs(engine) == 0


async def test_a_batch_sent_again_replays_every_job(client: AsyncTestClient[Any]) -> None:
    jobs = [sleep_job(n, idempotency_key=f"batch-{n}") for n in range(50)]

    first = await client.post("/jobs/batch", json={"jobs": jobs})
    again = await client.post("/jobs/batch", json={"jobs": jobs})

    assert (first.status_code, again.status_code) == (201, 200)
    assert [each["id"] for each in again.json()["jobs"]] == [
        each["id"] for each in first.json()["jobs"]
    ]
    assert all(each["replayed"] for each in again.json()["jobs"])
    assert all(
        each["idempotency_key"] == f"batch-{n}" for n, each in enumerate(again.json()["jobs"])
    )


async def test_a_key_reused_with_another_job_refuses_the_batch(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    await client.post("/jobs", json=sleep_job(1), headers={"Idempotency-Key": "taken"})

    response = await client.post(
        "/jobs/batch", json={"jobs": [sleep_job(2), sleep_job(3, idempotency_key="taken")]}
    )

    assert response.status_code == 409, response.text
    assert "taken" in response.json()["error"]
    assert await count_jobs(engine) == 1


async def test_unique_jobs_in_a_batch_answer_duplicates_with_the_holder(
    client: AsyncTestClient[Any],
) -> None:
    unique = {"key": "nightly"}
    response = await client.post(
        "/jobs/batch",
        json={"jobs": [sleep_job(1, unique=unique), sleep_job(2, unique=unique), sleep_job(3)]},
    )

    assert response.status_code == 201
    first, second, third = response.json()["jobs"]
    assert (first["duplicate"], second["duplicate"], third["duplicate"]) == (False, True, False)
    assert second["id"] == first["id"]


async def test_openapi_documents_the_batch_body_exactly_as_the_struct_decodes_it(
    client: AsyncTestClient[Any],
) -> None:
    document = (await client.get("/schema/openapi.json")).json()

    operation = document["paths"]["/jobs/batch"]["post"]
    schema = resolved(document, operation["requestBody"]["content"]["application/json"]["schema"])
    assert schema["required"] == ["jobs"]
    items = schema["properties"]["jobs"]
    assert (items["minItems"], items["maxItems"]) == (1, MAX_BATCH_JOBS)
    variants = [resolved(document, variant) for variant in items["items"]["oneOf"]]
    assert [variant["properties"]["type"]["const"] for variant in variants] == ["sleep", "webhook"]
    job = document["components"]["schemas"]["BatchJob"]
    assert set(job["properties"]) == set(BatchJob.__struct_fields__)
    for variant in variants:
        assert set(variant["properties"]) == set(BatchJob.__struct_fields__)
    assert {"200", "201", "400", "409", "413", "503"} <= set(operation["responses"])
