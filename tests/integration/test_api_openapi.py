"""The OpenAPI document: every route with its errors, the bodies as the structs decode
them, what is sent outside the routes, and the docs page served from the service itself."""

from __future__ import annotations

import re
from typing import Any, cast

import pytest
from litestar.testing import AsyncTestClient
from openapi_spec_validator import validate

from jobqueue.entrypoints.http.openapi import ASSETS_PATH, documented_assets
from jobqueue.wire.action_requests import BulkRequest
from jobqueue.wire.requests import CreateJobRequest
from tests.support.api import _operations, api, client, resolved

# Fixtures of tests.support.api, used by name.
__all__ = ["api", "client"]


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
