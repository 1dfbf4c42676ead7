"""Probes, request ids and logs, metrics, the OpenAPI document, bearer tokens."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

import pytest
from litestar.testing import AsyncTestClient
from openapi_spec_validator import validate
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.job import NewJob
from jobqueue.entrypoints.config.settings import Settings
from jobqueue.entrypoints.http.openapi import ASSETS_PATH, documented_assets
from jobqueue.wire.action_requests import BulkRequest
from jobqueue.wire.requests import CreateJobRequest
from tests.support.api import Api, build_api, eventually, metric_value, resolved
from tests.support.logs import captured_json_log
from tests.support.postgres import with_database

SLEEP = {"type": "sleep", "payload": {"duration": "1s"}}


@pytest.fixture
def api(engine: AsyncEngine, database_url: str) -> Api:
    return build_api(database_url)


@pytest.fixture
async def client(api: Api) -> AsyncIterator[AsyncTestClient[Any]]:
    async with AsyncTestClient(app=api.app) as client:
        yield client


# --- probes ----------------------------------------------------------------------------


async def test_healthz_answers_ok(client: AsyncTestClient[Any]) -> None:
    response = await client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_readyz_is_ready_while_the_database_answers(client: AsyncTestClient[Any]) -> None:
    response = await client.get("/readyz")

    assert response.status_code == 200
    assert response.json() == {"status": "ready"}


async def test_readyz_is_503_once_draining_while_healthz_stays_ok(
    api: Api, client: AsyncTestClient[Any]
) -> None:
    api.readiness.drain()

    ready = await client.get("/readyz")
    alive = await client.get("/healthz")

    assert ready.status_code == 503
    assert ready.json() == {"error": "not ready: shutting down"}
    assert alive.status_code == 200


async def test_readyz_is_503_when_the_database_is_unreachable(postgres_server: Any) -> None:
    missing = with_database(postgres_server.url, f"jq_missing_{uuid.uuid4().hex[:8]}")
    api = build_api(missing)
    async with AsyncTestClient(app=api.app) as client:
        ready = await client.get("/readyz")
        alive = await client.get("/healthz")

    assert ready.status_code == 503
    assert ready.json() == {"error": "not ready: database unreachable"}
    assert alive.status_code == 200


# --- request ids and logs --------------------------------------------------------------


async def test_a_sane_caller_request_id_is_echoed(client: AsyncTestClient[Any]) -> None:
    response = await client.get("/healthz", headers={"X-Request-ID": "caller-abc.123"})

    assert response.headers["x-request-id"] == "caller-abc.123"


@pytest.mark.parametrize(
    "given", [None, b"", b"x" * 129, b"has space", b"tab\there", "naïve".encode(), b"del\x7f"]
)
async def test_a_missing_or_insane_request_id_is_replaced_by_a_generated_one(
    client: AsyncTestClient[Any], given: bytes | None
) -> None:
    headers: dict[bytes, bytes] = {} if given is None else {b"X-Request-ID": given}

    response = await client.get("/healthz", headers=headers)

    generated = response.headers["x-request-id"]
    assert uuid.UUID(hex=generated)


async def test_generated_request_ids_differ_between_requests(
    client: AsyncTestClient[Any],
) -> None:
    first = await client.get("/healthz")
    second = await client.get("/healthz")

    assert first.headers["x-request-id"] != second.headers["x-request-id"]


async def test_every_request_writes_one_access_log_line_with_its_request_id(
    client: AsyncTestClient[Any],
) -> None:
    with captured_json_log() as log:
        ok = await client.get("/healthz", headers={"X-Request-ID": "access-1"})
        missing = await client.get("/nope")
        wrong_method = await client.delete("/healthz")

    access = log.find(logger="jobqueue.access")
    assert [(line["method"], line["path"], line["status"]) for line in access] == [
        ("GET", "/healthz", 200),
        ("GET", "/nope", 404),
        ("DELETE", "/healthz", 405),
    ]
    assert [line["request_id"] for line in access] == [
        ok.headers["x-request-id"],
        missing.headers["x-request-id"],
        wrong_method.headers["x-request-id"],
    ]
    assert access[0]["request_id"] == "access-1"
    for line in access:
        assert line["message"] == "request"
        assert line["level"] == "INFO"
        assert isinstance(line["duration_ms"], float)
        assert line["duration_ms"] >= 0
        assert line["ts"].endswith("Z")


async def test_submission_logs_carry_the_request_id_and_the_job_id(
    client: AsyncTestClient[Any],
) -> None:
    with captured_json_log() as log:
        first = await client.post(
            "/jobs", json=SLEEP, headers={"X-Request-ID": "submit-1", "Idempotency-Key": "log-1"}
        )
        again = await client.post(
            "/jobs", json=SLEEP, headers={"X-Request-ID": "submit-2", "Idempotency-Key": "log-1"}
        )

    job_id = first.json()["id"]
    assert again.json()["id"] == job_id
    submitted = log.find(message="job submitted")
    assert [(line["request_id"], line["job_id"], line["replayed"]) for line in submitted] == [
        ("submit-1", job_id, False),
        ("submit-2", job_id, True),
    ]
    assert all(line["job_type"] == "sleep" for line in submitted)


# --- metrics -----------------------------------------------------------------------------


async def test_metrics_are_prometheus_text_and_count_submissions_without_replays(
    client: AsyncTestClient[Any],
) -> None:
    await client.post("/jobs", json=SLEEP, headers={"Idempotency-Key": "m-1"})
    await client.post("/jobs", json=SLEEP, headers={"Idempotency-Key": "m-1"})
    await client.post("/jobs", json=SLEEP)

    response = await client.get("/metrics")

    assert response.status_code == 200
    # The exposition format's type, its charset named once.
    assert response.headers["content-type"] == "text/plain; version=1.0.0; charset=utf-8"
    text = response.text
    assert metric_value(text, "jobs_submitted_total") == 2
    for name in (
        "jobs_completed_total",
        "jobs_failed_total",
        "jobs_retried_total",
        "jobs_recovered_total",
        "job_processing_duration_seconds",
        "jobs_queue_depth",
        "process_cpu_seconds_total",
    ):
        assert f"# TYPE {name.removesuffix('_total')}" in text, name


async def test_queue_depth_gauge_reports_jobs_by_status(
    engine: AsyncEngine, database_url: str
) -> None:
    store = PostgresJobStore(engine)
    for _ in range(3):
        await store.submit(NewJob.build(type="sleep", default_max_attempts=1))
    api = build_api(database_url, with_queue_depth=True)

    async with AsyncTestClient(app=api.app) as client:
        text = await eventually(
            lambda: _metrics(client),
            lambda t: metric_value(t, "jobs_queue_depth", {"status": "pending"}) == 3,
        )

    assert metric_value(text, "jobs_queue_depth", {"status": "completed"}) == 0
    assert 'jobs_queue_depth{status="dead_letter"} 0.0' in text


async def _metrics(client: AsyncTestClient[Any]) -> str:
    return (await client.get("/metrics")).text


async def test_apps_in_one_process_keep_separate_metrics(database_url: str) -> None:
    first, second = build_api(database_url), build_api(database_url)
    async with AsyncTestClient(app=first.app) as one, AsyncTestClient(app=second.app) as two:
        await one.post("/jobs", json=SLEEP)

        assert metric_value((await one.get("/metrics")).text, "jobs_submitted_total") == 1
        assert metric_value((await two.get("/metrics")).text, "jobs_submitted_total") == 0


# --- OpenAPI -----------------------------------------------------------------------------


async def test_openapi_lists_every_route_with_its_error_responses(
    client: AsyncTestClient[Any],
) -> None:
    response = await client.get("/schema/openapi.json")

    assert response.status_code == 200
    document = response.json()
    routes = {
        (method.upper(), path)
        for path, item in document["paths"].items()
        for method in item
        if method in {"get", "post", "put", "delete", "patch"}
    }
    assert routes == {
        ("POST", "/jobs"),
        ("POST", "/jobs/batch"),
        ("GET", "/jobs"),
        ("GET", "/jobs/{job_id}"),
        ("GET", "/jobs/{job_id}/status"),
        ("GET", "/jobs/{job_id}/wait"),
        ("POST", "/jobs/{job_id}/retry"),
        ("POST", "/jobs/{job_id}/cancel"),
        ("POST", "/jobs/{job_id}/run-now"),
        ("POST", "/jobs/{job_id}/reschedule"),
        ("DELETE", "/jobs/{job_id}"),
        ("GET", "/workers"),
        ("POST", "/jobs/retry"),
        ("POST", "/jobs/discard"),
        ("POST", "/jobs/cancel"),
        ("GET", "/queues"),
        ("GET", "/periodic"),
        ("GET", "/types"),
        ("POST", "/queues/{name}/pause"),
        ("POST", "/queues/{name}/resume"),
        ("PUT", "/queues/{name}/limits"),
        ("DELETE", "/queues/{name}/limits"),
        ("GET", "/workflows/{workflow_id}"),
        ("POST", "/workflows/{workflow_id}/cancel"),
        ("POST", "/workflows/{workflow_id}/retry"),
        ("GET", "/healthz"),
        ("GET", "/readyz"),
        ("GET", "/metrics"),
    }
    paths = document["paths"]
    expected_errors = {
        ("post", "/jobs"): {"400", "409", "413", "503"},
        ("post", "/jobs/batch"): {"400", "409", "413", "503"},
        ("get", "/jobs"): {"400", "503"},
        ("get", "/jobs/{job_id}"): {"400", "404", "503"},
        ("get", "/jobs/{job_id}/status"): {"400", "404", "503"},
        ("get", "/jobs/{job_id}/wait"): {"400", "404", "503"},
        ("post", "/jobs/{job_id}/retry"): {"400", "404", "409", "503"},
        ("post", "/jobs/{job_id}/cancel"): {"400", "404", "409", "503"},
        ("post", "/jobs/{job_id}/run-now"): {"400", "404", "409", "503"},
        ("post", "/jobs/{job_id}/reschedule"): {"400", "404", "409", "503"},
        ("delete", "/jobs/{job_id}"): {"400", "404", "409", "503"},
        ("get", "/workers"): {"503"},
        ("post", "/jobs/retry"): {"400", "503"},
        ("post", "/jobs/discard"): {"400", "503"},
        ("post", "/jobs/cancel"): {"400", "503"},
        ("get", "/queues"): {"503"},
        ("get", "/periodic"): set(),
        ("get", "/types"): {"503"},
        ("post", "/queues/{name}/pause"): {"400", "503"},
        ("post", "/queues/{name}/resume"): {"400", "503"},
        ("put", "/queues/{name}/limits"): {"400", "503"},
        ("delete", "/queues/{name}/limits"): {"400", "503"},
        ("get", "/workflows/{workflow_id}"): {"400", "404", "503"},
        ("post", "/workflows/{workflow_id}/cancel"): {"400", "404", "503"},
        ("post", "/workflows/{workflow_id}/retry"): {"400", "404", "503"},
        ("get", "/readyz"): {"503"},
    }
    for (method, path), codes in expected_errors.items():
        responses = paths[path][method]["responses"]
        assert codes <= set(responses), (method, path, set(responses))
        for code in codes:
            schema = responses[code]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (method, path, code)
    assert set(paths["/jobs"]["post"]["responses"]) >= {"200", "201"}
    error_body = document["components"]["schemas"]["ErrorBody"]
    assert "error" in error_body["properties"]
    assert error_body["required"] == ["error"]


async def test_openapi_documents_the_create_body_exactly_as_the_struct_decodes_it(
    client: AsyncTestClient[Any],
) -> None:
    document = (await client.get("/schema/openapi.json")).json()

    body = document["paths"]["/jobs"]["post"]["requestBody"]
    # One variant per job type, each the body whole with its type and payload.
    one_of = body["content"]["application/json"]["schema"]
    assert list(one_of["discriminator"]["mapping"]) == ["sleep", "webhook"]
    variants = [resolved(document, variant) for variant in one_of["oneOf"]]
    for variant, job_type in zip(variants, ["sleep", "webhook"], strict=True):
        assert set(variant["properties"]) == set(CreateJobRequest.__struct_fields__)
        assert variant["properties"]["type"]["const"] == job_type
    sleep = variants[0]["properties"]["payload"]
    assert sleep == {"$ref": "#/components/schemas/sleep.SleepPayload"}
    assert document["components"]["schemas"]["sleep.SleepPayload"]["required"] == ["duration"]
    schema = document["components"]["schemas"]["CreateJobRequest"]
    assert body["required"] is True
    assert set(schema["properties"]) == set(CreateJobRequest.__struct_fields__)
    assert schema["required"] == ["type"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["max_attempts"]["minimum"] == 1
    assert schema["properties"]["max_attempts"]["maximum"] == 100
    header = [p for p in document["paths"]["/jobs"]["post"]["parameters"] if p["in"] == "header"]
    assert [p["name"] for p in header] == ["Idempotency-Key"]


@pytest.mark.parametrize(
    ("path", "statuses"),
    [
        ("/jobs/retry", ["cancelled", "dead_letter", "failed"]),
        ("/jobs/discard", ["cancelled", "dead_letter", "failed"]),
        ("/jobs/cancel", ["pending", "processing", "waiting"]),
    ],
)
async def test_openapi_documents_the_bulk_body_exactly_as_the_struct_decodes_it(
    client: AsyncTestClient[Any], path: str, statuses: list[str]
) -> None:
    document = (await client.get("/schema/openapi.json")).json()

    body = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]
    schema = resolved(document, body["schema"])
    assert set(schema["properties"]) == set(BulkRequest.__struct_fields__)
    assert schema["required"] == ["status"]
    assert schema["properties"]["status"]["enum"] == statuses
    assert schema["additionalProperties"] is False


def _operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method in {"get", "post", "put", "delete", "patch"}:
                yield method, path, operation


async def test_the_openapi_document_validates(client: AsyncTestClient[Any]) -> None:
    validate(cast(Any, (await client.get("/schema/openapi.json")).json()))


async def test_openapi_shows_the_headers_and_statuses_sent_outside_the_routes(
    client: AsyncTestClient[Any],
) -> None:
    document = (await client.get("/schema/openapi.json")).json()

    for method, path, operation in _operations(document):
        responses = operation["responses"]
        assert {"405", "500"} <= set(responses), (method, path)
        assert "401" not in responses, (method, path)  # no tokens configured
        for code, response in responses.items():
            assert "X-Request-ID" in response.get("headers", {}), (method, path, code)
        if "503" in responses:
            assert "Retry-After" in responses["503"]["headers"], (method, path)
    created = document["paths"]["/jobs"]["post"]["responses"]
    for code in ("200", "201"):
        assert "Location" in created[code]["headers"], code
    # The limit is an integer, and its default one the schema admits.
    [limit] = [p for p in document["paths"]["/jobs"]["get"]["parameters"] if p["name"] == "limit"]
    assert limit["schema"]["type"] == "integer"
    assert limit["schema"]["minimum"] <= limit["schema"]["default"] <= limit["schema"]["maximum"]
    assert "oneOf" not in limit["schema"]


async def test_the_docs_page_loads_every_asset_from_the_service_itself(
    client: AsyncTestClient[Any],
) -> None:
    page = await client.get("/schema/swagger")
    assert page.status_code == 200
    loaded = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
    # Every script, style and icon the page loads, and nothing from another host.
    assert set(loaded) == set(documented_assets())
    assert "//" not in " ".join(loaded)
    assert "http://" not in page.text.replace('"http://www.w3.org', "")
    assert "https://" not in page.text
    for url in loaded:
        asset = await client.get(url)
        assert asset.status_code == 200, url
        assert len(asset.content) > 500, url
    script = await client.get(f"{ASSETS_PATH}/swagger-ui-bundle.js")
    assert "javascript" in script.headers["content-type"]
    assert "SwaggerUIBundle" in script.text
    # The page renders the service's own document.
    assert '"title":"jobqueue"' in page.text.replace(" ", "")


# --- bearer tokens -----------------------------------------------------------------------


@pytest.fixture
async def guarded(engine: AsyncEngine, database_url: str) -> AsyncIterator[AsyncTestClient[Any]]:
    api = build_api(database_url, settings=Settings(api_tokens=frozenset({"alpha", "beta"})))
    async with AsyncTestClient(app=api.app) as client:
        yield client


@pytest.mark.parametrize(
    "authorization", [None, "Bearer", "Bearer wrong", "Basic YWxwaGE6", "alpha", "Bearer alph"]
)
async def test_jobs_routes_refuse_requests_without_a_valid_token(
    guarded: AsyncTestClient[Any], authorization: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}

    responses = [
        await guarded.post("/jobs", json=SLEEP, headers=headers),
        await guarded.get("/jobs?status=pending", headers=headers),
        await guarded.get(f"/jobs/{uuid.uuid4()}", headers=headers),
        await guarded.get(f"/jobs/{uuid.uuid4()}/status", headers=headers),
        await guarded.post(f"/jobs/{uuid.uuid4()}/retry", headers=headers),
        await guarded.get("/schema/openapi.json", headers=headers),
    ]

    for response in responses:
        assert response.status_code == 401, response.text
        assert set(response.json()) == {"error"}
        assert response.headers["www-authenticate"].startswith("Bearer")


async def test_any_configured_token_is_accepted(guarded: AsyncTestClient[Any]) -> None:
    created = await guarded.post("/jobs", json=SLEEP, headers={"Authorization": "Bearer alpha"})
    read = await guarded.get(
        f"/jobs/{created.json()['id']}", headers={"Authorization": "bearer beta"}
    )

    assert created.status_code == 201
    assert read.status_code == 200


async def test_probes_and_metrics_stay_open_when_tokens_are_required(
    guarded: AsyncTestClient[Any],
) -> None:
    for path in ("/healthz", "/readyz", "/metrics"):
        assert (await guarded.get(path)).status_code == 200, path


async def test_openapi_declares_bearer_auth_when_tokens_are_required(
    guarded: AsyncTestClient[Any],
) -> None:
    document = (
        await guarded.get("/schema/openapi.json", headers={"Authorization": "Bearer alpha"})
    ).json()

    assert document["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
    }
    assert document["paths"]["/jobs"]["post"]["security"] == [{"bearerAuth": []}]
    assert "security" not in document["paths"]["/healthz"]["get"]


async def test_openapi_shows_the_401_and_still_validates_when_tokens_are_required(
    guarded: AsyncTestClient[Any],
) -> None:
    document = (
        await guarded.get("/schema/openapi.json", headers={"Authorization": "Bearer alpha"})
    ).json()

    validate(document)
    for method, path, operation in _operations(document):
        guarded_operation = bool(operation.get("security"))
        assert ("401" in operation["responses"]) is guarded_operation, (method, path)
    assert "WWW-Authenticate" in document["paths"]["/jobs"]["post"]["responses"]["401"]["headers"]
    # The docs page's assets hold nothing of ours: open without a token.
    for url in documented_assets():
        assert (await guarded.get(url)).status_code == 200, url
