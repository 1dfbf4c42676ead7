"""In-process enqueue given the workers' registry refuses what `POST /jobs` refuses, with
the same words, and stores nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue import InvalidPayload, NewJob, Registry, UnknownJobType, enqueue, enqueue_many
from jobqueue.adapters.handlers import builtin_registry
from jobqueue.domain.registry import JobContext
from jobqueue.domain.status import Status
from tests.support.api import build_api
from tests.support.job_rows import count_jobs


@dataclass
class Invoice:
    customer_id: int
    amount_cents: int


def _invoices() -> Registry:
    registry = Registry()

    @registry.handler("send_invoice", payload=Invoice)
    async def send_invoice(ctx: JobContext, payload: Invoice) -> None:
        pass

    return registry


def _registry() -> Registry:
    """What the API's registry holds: the built-in types and the invoices."""
    registry = builtin_registry()
    registry.include(_invoices())
    return registry


@pytest.fixture
async def client(engine: AsyncEngine, database_url: str) -> AsyncIterator[AsyncTestClient[Any]]:
    api = build_api(database_url, handlers=_invoices())
    async with AsyncTestClient(app=api.app) as client:
        yield client


REFUSED = [
    ({"type": "send_invoces", "payload": {}}, UnknownJobType),
    ({"type": "send_invoice", "payload": {"customer_id": "7", "amount_cents": 1}}, InvalidPayload),
    ({"type": "send_invoice", "payload": {"customer_id": 7}}, InvalidPayload),
    ({"type": "sleep", "payload": {"duration": "forever"}}, InvalidPayload),
]


@pytest.mark.parametrize(("body", "error"), REFUSED)
async def test_enqueue_refuses_what_http_refuses_with_the_same_message(
    engine: AsyncEngine,
    client: AsyncTestClient[Any],
    body: dict[str, Any],
    error: type[Exception],
) -> None:
    answered = await client.post("/jobs", json=body)
    assert answered.status_code == 400, answered.text
    new = NewJob.build(type=body["type"], payload=body["payload"])

    async with engine.begin() as connection:
        with pytest.raises(error) as raised:
            await enqueue(connection, new, registry=_registry())
    with pytest.raises(error) as on_engine:
        await enqueue(engine, new, registry=_registry())
    with pytest.raises(error) as in_bulk:
        await enqueue_many(
            engine,
            [NewJob.build(type="send_invoice", payload={"customer_id": 1, "amount_cents": 2}), new],
            registry=_registry(),
        )

    http_error = answered.json()["error"]
    assert str(raised.value) == str(on_engine.value) == str(in_bulk.value) == http_error
    # Nothing was stored, not even the bulk call's valid first job.
    assert await count_jobs(engine, Status.PENDING) == 0


async def test_a_valid_job_is_enqueued_with_the_registry_given(engine: AsyncEngine) -> None:
    new = NewJob.build(type="send_invoice", payload={"customer_id": 7, "amount_cents": 1200})
    async with engine.begin() as connection:
        submitted = await enqueue(connection, new, registry=_registry())
    assert submitted.job.payload == {"customer_id": 7, "amount_cents": 1200}
    assert await count_jobs(engine, Status.PENDING) == 1


async def test_without_a_registry_nothing_is_checked_for_a_fleet_whose_code_is_elsewhere(
    engine: AsyncEngine,
) -> None:
    await enqueue(engine, NewJob.build(type="runs_elsewhere", payload={"any": "thing"}))
    assert await count_jobs(engine, Status.PENDING) == 1
