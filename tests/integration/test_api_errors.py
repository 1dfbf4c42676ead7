"""Every refusal of the API is JSON `{"error": …}` with the status that says why."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.job import Job
from jobqueue.entrypoints.config.settings import Settings
from tests.support.api import build_api
from tests.support.logs import captured_json_log
from tests.support.postgres import with_database

BODY_LIMIT = 16 * 1024


@pytest.fixture
async def client(engine: AsyncEngine, database_url: str) -> AsyncIterator[AsyncTestClient[Any]]:
    api = build_api(database_url, settings=Settings(max_body_bytes=BODY_LIMIT))
    async with AsyncTestClient(app=api.app) as client:
        yield client


def error_of(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}, body
    assert isinstance(body["error"], str)
    assert "Traceback" not in body["error"]
    return str(body["error"])


async def post_raw(client: httpx.AsyncClient, body: bytes) -> httpx.Response:
    return await client.post("/jobs", content=body, headers={"Content-Type": "application/json"})


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"type": "sleep",', "request body is not valid JSON: Input data was truncated"),
        (b'{"type": "sleep"} trailing', "request body is not valid JSON: JSON is malformed"),
        (b"\xff\xfe", "request body is not valid JSON"),
        (b"", "request body is empty"),
        (b"   ", "request body is empty"),
        (b"[1, 2]", "invalid request body: Expected `object`, got `array`"),
        (b"null", "invalid request body: Expected `object`, got `null`"),
        (b'"sleep"', "invalid request body: Expected `object`, got `str`"),
        (b"{}", "invalid request body: Object missing required field `type`"),
        (b'{"type": 7}', "invalid request body: Expected `str`, got `int` - at `$.type`"),
        (
            b'{"type": "sleep", "payload": {"duration": "1s"}, "max_attempts": "3"}',
            "invalid request body: Expected `int`, got `str` - at `$.max_attempts`",
        ),
        (
            b'{"type": "sleep", "payload": {"duration": "1s"}, "max_attempts": 2.5}',
            "invalid request body: Expected `int`, got `float` - at `$.max_attempts`",
        ),
        (
            b'{"type": "sleep", "payload": {"duration": "1s"}, "max_attempts": null}',
            "invalid request body: Expected `int`, got `null` - at `$.max_attempts`",
        ),
        (
            b'{"type": "sleep", "payload": {"duration": "1s"}, "urgency": 1}',
            "invalid request body: Object contains unknown field `urgency`",
        ),
        (
            b'{"type": "sleep", "payload": {"duration": "1s"}, "priority": 10}',
            "invalid request body: Expected `int` <= 9 - at `$.priority`",
        ),
        (
            b'{"type": "sleep", "payload": {"duration": "1s"}, "priority": -1}',
            "invalid request body: Expected `int` >= 0 - at `$.priority`",
        ),
        (
            b'{"type": "sleep", "payload": {"duration": "1s"}, "queue": "no spaces"}',
            "invalid request body: Expected `str` matching regex",
        ),
        (
            b'{"type": "sleep", "payload": {"duration": "1s"}, "queue": ""}',
            "invalid request body: Expected `str` matching regex",
        ),
        (
            b'{"type": "sleep", "payload": {"duration": "1s"}, "max_attempts": 0}',
            "invalid request body: Expected `int` >= 1 - at `$.max_attempts`",
        ),
        (
            b'{"type": "sleep", "payload": {"duration": "1s"}, "max_attempts": 101}',
            "invalid request body: Expected `int` <= 100 - at `$.max_attempts`",
        ),
        (b'{"type": "   "}', "type must be a non-empty string"),
        (b'{"type": "resize_image"}', "unknown job type 'resize_image' (known types: 'sleep'"),
        (
            b'{"type": "sleep", "payload": {}}',
            "invalid payload for job type 'sleep': Object missing required field `duration`",
        ),
        (
            b'{"type": "sleep", "payload": {"duration": "forever"}}',
            "invalid payload for job type 'sleep'",
        ),
        (b'{"type": "sleep", "payload": []}', "invalid payload for job type 'sleep'"),
        (
            b'{"type": "webhook", "payload": {"url": "http://10.0.0.7/hook"}}',
            "url's host 10.0.0.7 is a private address; set WEBHOOK_ALLOW_PRIVATE=true",
        ),
        (
            b'{"type": "webhook", "payload": {"url": "http://[::1]:8080/"}}',
            "url's host ::1 is a loopback address",
        ),
        (
            b'{"type": "sleep", "payload": {"duration": "\xff"}}',
            "request body is not valid UTF-8: a string holds the byte 0xff",
        ),
        (
            b'{"type": "sleep", "payload": ' + b"[" * 5000 + b"]" * 5000 + b"}",
            "request body is nested too deeply",
        ),
    ],
)
async def test_invalid_submissions_are_400_with_a_precise_message(
    client: AsyncTestClient[Any], body: bytes, expected: str
) -> None:
    assert expected in error_of(await post_raw(client, body), 400)


async def test_a_payload_postgres_cannot_store_is_a_400_not_a_500(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    # Valid JSON and valid Python, but PostgreSQL's jsonb refuses \u0000.
    response = await post_raw(
        client, b'{"type": "webhook", "payload": {"url": "https://example.com/\\u0000"}}'
    )
    nul_in_free_payload = await post_raw(
        client, b'{"type": "sleep", "payload": {"duration": "1s", "x": "\\u0000"}}'
    )

    assert response.status_code == 400, response.text
    assert nul_in_free_payload.status_code == 400, nul_in_free_payload.text


async def test_an_overlong_idempotency_key_is_a_400(client: AsyncTestClient[Any]) -> None:
    response = await client.post(
        "/jobs",
        json={"type": "sleep", "payload": {"duration": "1s"}},
        headers={"Idempotency-Key": "k" * 256},
    )

    assert "Idempotency-Key must be 1 to 255" in error_of(response, 400)


async def test_a_body_over_the_limit_is_a_413(client: AsyncTestClient[Any]) -> None:
    body = b'{"type": "sleep", "payload": {"duration": "1s", "pad": "' + b"x" * BODY_LIMIT + b'"}}'

    response = await post_raw(client, body)

    assert error_of(response, 413) == f"request body too large: the limit is {BODY_LIMIT} bytes"


FORM = "application/x-www-form-urlencoded"


@pytest.mark.parametrize(
    ("headers", "shown"),
    [
        ({"content-type": "text/plain;charset=UTF-8"}, "text/plain"),
        (
            {"content-type": "application/x-www-form-urlencoded"},
            "application/x-www-form-urlencoded",
        ),
        ({}, "none"),
    ],
)
async def test_a_body_that_is_not_sent_as_json_is_a_415_that_stores_nothing(
    client: AsyncTestClient[Any], engine: AsyncEngine, headers: dict[str, str], shown: str
) -> None:
    # What a web page may send to a local service cross-origin, without a preflight.
    body = b'{"type": "sleep", "payload": {"duration": "1s"}}'

    response = await client.post("/jobs", content=body, headers=headers)

    assert error_of(response, 415) == (
        f"send the body as JSON with Content-Type: application/json (got {shown})"
    )
    async with engine.connect() as connection:
        assert (await connection.execute(text("SELECT count(*) FROM jobs"))).scalar() == 0


async def test_json_with_parameters_or_a_json_suffix_is_accepted(
    client: AsyncTestClient[Any],
) -> None:
    body = b'{"type": "sleep", "payload": {"duration": "1s"}}'
    for media_type in ("application/json; charset=utf-8", "application/merge-patch+json"):
        response = await client.post("/jobs", content=body, headers={"content-type": media_type})
        assert response.status_code == 201, response.text
    # A request without a body needs no Content-Type.
    job = response.json()["id"]
    assert (await client.post(f"/jobs/{job}/cancel")).status_code == 200


@pytest.mark.parametrize("site", ["cross-site", "same-site"])
async def test_a_write_another_origins_page_makes_is_a_403_that_changes_nothing(
    client: AsyncTestClient[Any], engine: AsyncEngine, site: str
) -> None:
    # No body, no token: what a page on another site (or another port of localhost)
    # can make a browser send to a service on the user's machine.
    refused = await client.post("/queues/mail/pause", headers={"sec-fetch-site": site})

    assert error_of(refused, 403).startswith("a page of another origin may not change")
    listed = (await client.get("/queues", headers={"sec-fetch-site": site})).json()
    assert not any(queue["name"] == "mail" and queue["paused"] for queue in listed["queues"])
    async with engine.connect() as connection:
        assert (await connection.execute(text("SELECT count(*) FROM queues"))).scalar() == 0
    # The same request from a page of this origin, or from a program, goes on.
    for headers in ({"sec-fetch-site": "same-origin"}, {}):
        assert (await client.post("/queues/mail/pause", headers=headers)).status_code == 200


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/jobs/not-a-uuid"),
        ("GET", "/jobs/not-a-uuid/status"),
        ("POST", "/jobs/not-a-uuid/retry"),
        ("GET", "/jobs/" + "9" * 300),
    ],
)
async def test_a_malformed_job_id_is_a_400(
    client: AsyncTestClient[Any], method: str, path: str
) -> None:
    response = await client.request(method, path)

    assert error_of(response, 400).startswith("job id must be a UUID, got ")


@pytest.mark.parametrize(
    ("method", "suffix"), [("GET", ""), ("GET", "/status"), ("POST", "/retry")]
)
async def test_an_unknown_job_is_a_404(
    client: AsyncTestClient[Any], method: str, suffix: str
) -> None:
    job_id = uuid.uuid4()

    response = await client.request(method, f"/jobs/{job_id}{suffix}")

    assert error_of(response, 404) == f"job {job_id} not found"


async def test_an_unknown_route_is_a_json_404(client: AsyncTestClient[Any]) -> None:
    response = await client.get("/nothing/here")

    assert error_of(response, 404) == "no route for GET /nothing/here"
    assert response.headers["x-request-id"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("DELETE", "/jobs"),
        ("PUT", "/jobs/" + "0b6c3a51-8f0e-4d5e-9a4e-1f2d3c4b5a69"),
        ("PUT", "/jobs"),
        ("POST", "/healthz"),
    ],
)
async def test_a_wrong_method_is_a_json_405(
    client: AsyncTestClient[Any], method: str, path: str
) -> None:
    response = await client.request(method, path)

    assert error_of(response, 405) == f"method {method} is not allowed on {path}"
    assert response.headers["x-request-id"]


class ExplodingStore(PostgresJobStore):
    """A store with a bug: reading a job raises something no handler expects."""

    async def get(self, job_id: uuid.UUID) -> Job:
        raise RuntimeError("secret internal detail")


async def test_an_unexpected_error_is_a_500_with_the_request_id_and_no_traceback(
    database_url: str,
) -> None:
    engine = create_engine(database_url, pool_size=1)
    api = build_api(store=ExplodingStore(engine))
    with captured_json_log() as log:
        async with AsyncTestClient(app=api.app) as client:
            response = await client.get(f"/jobs/{uuid.uuid4()}", headers={"X-Request-ID": "boom-1"})

    assert response.status_code == 500
    assert response.json() == {"error": "internal server error", "request_id": "boom-1"}
    assert "secret internal detail" not in response.text
    [logged] = log.find(message="unhandled error while serving a request")
    assert logged["request_id"] == "boom-1"
    assert "RuntimeError: secret internal detail" in logged["traceback"]
    assert logged["level"] == "ERROR"


async def test_an_unreachable_database_is_a_503(postgres_server: Any) -> None:
    missing = with_database(postgres_server.url, f"jq_missing_{uuid.uuid4().hex[:8]}")
    api = build_api(missing)
    async with AsyncTestClient(app=api.app) as client:
        submit = await client.post("/jobs", json={"type": "sleep", "payload": {"duration": "1s"}})
        read = await client.get(f"/jobs/{uuid.uuid4()}")

    for response in (submit, read):
        assert "the job store is unavailable" in error_of(response, 503)
        assert response.headers["retry-after"] == "1"
