"""Bearer tokens: the jobs routes refuse a request without a valid one, any configured
token is accepted, probes and metrics stay open, and the OpenAPI document says so."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from openapi_spec_validator import validate
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.entrypoints.config.settings import Settings
from jobqueue.entrypoints.http.openapi import documented_assets
from tests.support.api import SLEEP, _operations, build_api


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
