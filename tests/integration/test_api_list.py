"""`GET /jobs` over HTTP against a real PostgreSQL: one status's jobs, page by page, every
bad query a precise 400, and the same bearer-token rule as the other /jobs routes."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.entrypoints.config.settings import Settings
from tests.support.api import build_api
from tests.support.gated_jobs import RECORD_FIELDS, Gate, handlers_for, wait_for_status

SLEEP = {"type": "sleep", "payload": {"duration": "1s"}}
STATUSES = "waiting, pending, processing, completed, failed, dead_letter, cancelled"


@pytest.fixture
async def client(engine: AsyncEngine, database_url: str) -> AsyncIterator[AsyncTestClient[Any]]:
    # No pool: submitted jobs stay pending, where the test put them.
    async with AsyncTestClient(app=build_api(database_url).app) as client:
        yield client


async def submitted(
    client: AsyncTestClient[Any], count: int, job: dict[str, Any] = SLEEP
) -> list[str]:
    ids = []
    for _ in range(count):
        response = await client.post("/jobs", json=job)
        assert response.status_code == 201, response.text
        ids.append(response.json()["id"])
    return ids


async def listed(client: AsyncTestClient[Any], **params: str) -> dict[str, Any]:
    response = await client.get("/jobs", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def cursor_of(document: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(document).encode()).decode().rstrip("=")


async def test_a_dead_lettered_job_is_found_by_listing_and_retried_by_its_listed_id(
    engine: AsyncEngine, database_url: str
) -> None:
    gate = Gate()
    api = build_api(
        database_url, settings=Settings(max_attempts=2), handlers=handlers_for(gate), with_pool=True
    )
    async with AsyncTestClient(app=api.app) as client:
        created = (await client.post("/jobs", json={"type": "gated"})).json()
        await wait_for_status(client, created["id"], "dead_letter")

        page = await listed(client, status="dead_letter")
        [dead] = page["jobs"]
        assert dead["id"] == created["id"]
        assert dead["attempts"] == 2
        assert "gate closed" in dead["last_error"]
        assert page["next_cursor"] is None

        gate.open = True
        retried = await client.post(f"/jobs/{dead['id']}/retry")
        assert retried.status_code == 200, retried.text
        await wait_for_status(client, created["id"], "completed")

        assert (await listed(client, status="dead_letter"))["jobs"] == []
        [done] = (await listed(client, status="completed"))["jobs"]
        assert done["id"] == created["id"]


async def test_a_page_holds_full_job_records_of_the_status_asked_for(
    client: AsyncTestClient[Any],
) -> None:
    [job_id] = await submitted(client, 1)

    page = await listed(client, status="pending")

    assert set(page) == {"jobs", "next_cursor"}
    assert page["next_cursor"] is None
    [record] = page["jobs"]
    assert set(record) == RECORD_FIELDS
    assert record == (await client.get(f"/jobs/{job_id}")).json()
    assert (await listed(client, status="completed")) == {"jobs": [], "next_cursor": None}


async def test_following_next_cursor_visits_every_job_once_in_due_order(
    client: AsyncTestClient[Any],
) -> None:
    ids = await submitted(client, 5)

    pages = [await listed(client, status="pending", limit="2")]
    while pages[-1]["next_cursor"] is not None:
        assert len(pages) < 10, "pagination does not end"
        cursor = pages[-1]["next_cursor"]
        pages.append(await listed(client, status="pending", limit="2", cursor=cursor))

    assert [len(page["jobs"]) for page in pages] == [2, 2, 1]
    # Submitted one after another, so due one after another: the order they were sent.
    assert [job["id"] for page in pages for job in page["jobs"]] == ids


async def test_the_limit_defaults_to_fifty(client: AsyncTestClient[Any]) -> None:
    await submitted(client, 51)

    page = await listed(client, status="pending")

    assert len(page["jobs"]) == 50
    assert page["next_cursor"] is not None


async def test_type_narrows_the_listing(client: AsyncTestClient[Any]) -> None:
    sleeps = await submitted(client, 2)
    await submitted(client, 1, {"type": "webhook", "payload": {"url": "https://example.com/"}})

    page = await listed(client, status="pending", type="sleep")

    assert [job["id"] for job in page["jobs"]] == sleeps


BAD_QUERIES: list[tuple[dict[str, Any], str]] = [
    ({}, f"query parameter 'status' is required: one of {STATUSES}"),
    ({"status": "done"}, f"unknown status 'done': expected one of {STATUSES}"),
    ({"status": "PENDING"}, f"unknown status 'PENDING': expected one of {STATUSES}"),
    ({"status": "pending", "limit": "0"}, "limit must be an integer from 1 to 500, got '0'"),
    ({"status": "pending", "limit": "501"}, "limit must be an integer from 1 to 500, got '501'"),
    ({"status": "pending", "limit": "ten"}, "limit must be an integer from 1 to 500, got 'ten'"),
    ({"status": "pending", "limit": "-1"}, "limit must be an integer from 1 to 500, got '-1'"),
    ({"status": "pending", "limit": ""}, "limit must be an integer from 1 to 500, got ''"),
    ({"status": "pending", "type": ""}, "type must be 1 to 200 characters, without NUL"),
    ({"status": "pending", "type": "x" * 201}, "type must be 1 to 200 characters, without NUL"),
    ({"status": "pending", "type": "a\x00b"}, "type must be 1 to 200 characters, without NUL"),
    (
        {"status": "pending", "offset": "10"},
        "unknown query parameter 'offset' (allowed: status, type, queue, limit, cursor)",
    ),
    ({"status": ["pending", "failed"]}, "query parameter 'status' must be given once"),
    ({"status": "pending", "limit": ["1", "2"]}, "query parameter 'limit' must be given once"),
    (
        {"status": "completed", "queue": "mail"},
        "queue cannot narrow a listing of completed jobs: no index holds them by queue; "
        "list them without it, or by type",
    ),
    (
        {"status": "pending", "queue": "no spaces"},
        "queue name must be 1 to 64 letters, digits or '_.:-', starting with a letter or "
        "digit; got 'no spaces'",
    ),
]
MALFORMED = "cursor is malformed: pass a previous page's next_cursor back unchanged"
BAD_CURSORS = [
    "not base64!",
    "",
    cursor_of(["a list"]),
    cursor_of({"s": "pending", "k": "2030-01-01T00:00:00+00:00"}),
    cursor_of({"s": "pending", "k": "yesterday", "id": "00000000-0000-0000-0000-000000000001"}),
    cursor_of(
        {"s": "pending", "k": "2030-01-01T00:00:00", "id": "00000000-0000-0000-0000-000000000001"}
    ),
    cursor_of({"s": "pending", "k": "2030-01-01T00:00:00+00:00", "id": "not-a-uuid"}),
    cursor_of({"s": "pending", "k": 1, "id": "00000000-0000-0000-0000-000000000001"}),
    # Pending jobs are listed by queue and priority first: a cursor must carry both, typed.
    cursor_of({"s": "pending", "k": "2030-01-01T00:00:00+00:00", "id": str(UUID(int=1))}),
    cursor_of(
        {"s": "pending", "k": "2030-01-01T00:00:00+00:00", "id": str(UUID(int=1)), "g": ["a"]}
    ),
    cursor_of(
        {"s": "pending", "k": "2030-01-01T00:00:00+00:00", "id": str(UUID(int=1)), "g": [0, "a"]}
    ),
    cursor_of(
        {"s": "pending", "k": "2030-01-01T00:00:00+00:00", "id": str(UUID(int=1)), "g": "a,0"}
    ),
    base64.urlsafe_b64encode(b"\xff\xfe").decode(),
    "A" * 600,
]


@pytest.mark.parametrize(("params", "message"), BAD_QUERIES)
async def test_a_bad_query_is_a_400_saying_what_is_wrong(
    client: AsyncTestClient[Any], params: dict[str, Any], message: str
) -> None:
    response = await client.get("/jobs", params=params)

    assert response.status_code == 400, response.text
    assert response.json() == {"error": message}


@pytest.mark.parametrize("cursor", BAD_CURSORS)
async def test_a_malformed_cursor_is_a_400(client: AsyncTestClient[Any], cursor: str) -> None:
    response = await client.get("/jobs", params={"status": "pending", "cursor": cursor})

    assert response.status_code == 400, response.text
    assert response.json() == {"error": MALFORMED}


async def test_a_cursor_from_another_status_is_a_400(client: AsyncTestClient[Any]) -> None:
    await submitted(client, 2)
    cursor = (await listed(client, status="pending", limit="1"))["next_cursor"]

    response = await client.get("/jobs", params={"status": "completed", "cursor": cursor})

    assert response.status_code == 400, response.text
    assert response.json() == {
        "error": "cursor belongs to a listing of status 'pending', not 'completed': "
        "start again without a cursor"
    }


async def test_listing_requires_a_token_when_tokens_are_configured(
    engine: AsyncEngine, database_url: str
) -> None:
    api = build_api(database_url, settings=Settings(api_tokens=frozenset({"alpha"})))
    async with AsyncTestClient(app=api.app) as client:
        refused = await client.get("/jobs", params={"status": "pending"})
        wrong = await client.get(
            "/jobs", params={"status": "pending"}, headers={"Authorization": "Bearer beta"}
        )
        allowed = await client.get(
            "/jobs", params={"status": "pending"}, headers={"Authorization": "Bearer alpha"}
        )

    assert refused.status_code == 401, refused.text
    assert refused.json() == {"error": "missing bearer token: send 'Authorization: Bearer <token>'"}
    assert wrong.status_code == 401, wrong.text
    assert allowed.status_code == 200, allowed.text


async def test_openapi_documents_the_query_parameters(client: AsyncTestClient[Any]) -> None:
    document = (await client.get("/schema/openapi.json")).json()

    operation = document["paths"]["/jobs"]["get"]
    parameters = {p["name"]: p for p in operation["parameters"] if p["in"] == "query"}
    assert set(parameters) == {"status", "type", "queue", "limit", "cursor"}
    assert parameters["status"]["required"] is True
    assert set(parameters["status"]["schema"]["enum"]) == set(STATUSES.split(", "))
    assert parameters["limit"]["schema"]["minimum"] == 1
    assert parameters["limit"]["schema"]["maximum"] == 500
    listing = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert listing == {"$ref": "#/components/schemas/JobList"}
    assert set(document["components"]["schemas"]["JobList"]["properties"]) == {
        "jobs",
        "next_cursor",
    }
