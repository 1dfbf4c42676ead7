"""One job, every way in: POST /jobs and POST /jobs/batch (to a `serve` that has the
handlers, and to an `api` that knows them only as the serve published them), the Python
client, and in-process `enqueue` and `enqueue_many`. Each is stored with the same queue,
priority, attempt budget, timeout and unique key: the type's options where the
submission says nothing, the service's MAX_ATTEMPTS where neither does. A graph too,
over HTTP and in-process (`enqueue_graph`)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from datetime import timedelta
from functools import partial
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue import NewJob, Step, Unique, enqueue, enqueue_graph, enqueue_many
from jobqueue.client import Client
from tests.integration.ways_in_handlers import MODULE, registry
from tests.support.processes import Service, free_port, start, until

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("engine")]

MAX_ATTEMPTS = "9"
# The columns a way in could get wrong.
_STORED = "queue, priority, max_attempts, timeout, unique_key, unique_states"
_CUSTOMERS = itertools.count(1)


@pytest.fixture(scope="module")
def services(
    database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[Service]]:
    logs = tmp_path_factory.mktemp("ways_in")
    # Consuming a queue none of the jobs is in: they stay as they were stored.
    serve = start(
        ["serve", "--handlers", MODULE],
        free_port(),
        logs / "serve",
        DATABASE_URL=database_url,
        MAX_ATTEMPTS=MAX_ATTEMPTS,
        QUEUES="elsewhere",
    )
    api: Service | None = None
    try:
        serve.wait_until_healthy()
        api = start(
            ["api"], free_port(), logs / "api", DATABASE_URL=database_url, MAX_ATTEMPTS=MAX_ATTEMPTS
        )
        api.wait_until_healthy()
        yield [serve, api]
    finally:
        for service in (serve, api):
            if service is not None:
                service.stop()


async def _rows(engine: AsyncEngine, job_type: str) -> list[tuple[Any, ...]]:
    async with engine.connect() as connection:
        result = await connection.execute(
            text(f"SELECT payload, {_STORED} FROM jobs WHERE type = :type ORDER BY created_at"),
            {"type": job_type},
        )
        return [tuple(row) for row in result]


def _accepted(http: httpx.Client, path: str, body: object) -> bool:
    """Whether the service took `body` at `path` (201)."""
    return http.post(path, json=body).status_code == 201


def _over_http(services: list[Service], job_type: str) -> int:
    """The job sent every way over HTTP; how many it made."""
    sent = 0
    for service in services:
        with httpx.Client(base_url=service.base_url, timeout=10) as http:
            single = {"type": job_type, "payload": {"customer": next(_CUSTOMERS)}}
            # The api learns the types from the serve's publication on its first miss.
            until(
                partial(_accepted, http, "/jobs", single),
                f"{service.base_url} accepts {job_type}",
                within=10,
            )
            batch = {"jobs": [{"type": job_type, "payload": {"customer": next(_CUSTOMERS)}}]}
            assert http.post("/jobs/batch", json=batch).status_code == 201
        with Client(service.base_url) as client:
            client.submit(job_type, {"customer": next(_CUSTOMERS)})
        sent += 3
    return sent


async def _in_process(engine: AsyncEngine, job_type: str) -> int:
    async with engine.begin() as connection:
        new = NewJob.build(type=job_type, payload={"customer": next(_CUSTOMERS)})
        await enqueue(connection, new, registry=registry)
        news = [
            NewJob.build(type=job_type, payload={"customer": next(_CUSTOMERS)}) for _ in range(2)
        ]
        await enqueue_many(connection, news, registry=registry)
    return 3


@pytest.mark.parametrize(
    ("job_type", "expected"),
    [
        # The handler's options, and a unique key derived from the customer.
        ("send_invoice", ("billing", 3, 7, timedelta(seconds=45), ["pending", "processing"])),
        # No options: the defaults, and MAX_ATTEMPTS.
        ("plain", ("default", 0, int(MAX_ATTEMPTS), None, None)),
    ],
)
async def test_the_same_job_is_stored_alike_whichever_way_it_came_in(
    services: list[Service],
    engine: AsyncEngine,
    monkeypatch: pytest.MonkeyPatch,
    job_type: str,
    expected: tuple[Any, ...],
) -> None:
    # An in-process producer configured as the service is.
    monkeypatch.setenv("MAX_ATTEMPTS", MAX_ATTEMPTS)
    sent = await asyncio.to_thread(_over_http, services, job_type)
    sent += await _in_process(engine, job_type)

    rows = await _rows(engine, job_type)
    assert len(rows) == sent == 9
    queue, priority, budget, timeout, states = expected
    unique = Unique(by=("customer",))
    for payload, *stored in rows:
        key = unique.key_for(job_type, payload) if states is not None else None
        assert tuple(stored) == (queue, priority, budget, timeout, key, states), payload


def _graph_over_http(services: list[Service]) -> None:
    """A graph of two plain jobs sent to each service; a unique type's refused."""
    graph = {
        "jobs": [
            {"type": "plain", "name": "first", "payload": {"customer": 0}},
            {"type": "plain", "depends_on": ["first"], "payload": {"customer": 0}},
        ]
    }
    for service in services:
        with httpx.Client(base_url=service.base_url, timeout=10) as http:
            until(
                partial(_accepted, http, "/jobs/batch", graph),
                f"{service.base_url} accepts a graph of plain jobs",
                within=10,
            )
            # A unique type's jobs (its handler's options) cannot be a graph's.
            unique = {"jobs": [{**job, "type": "send_invoice"} for job in graph["jobs"]]}
            refused = http.post("/jobs/batch", json=unique)
            assert refused.status_code == 400
            assert "cannot be unique (send_invoice's jobs are)" in refused.json()["error"]


async def test_a_graph_is_resolved_alike_over_http_and_in_process(
    services: list[Service], engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAX_ATTEMPTS", MAX_ATTEMPTS)
    await asyncio.to_thread(_graph_over_http, services)
    async with engine.begin() as connection:
        first = Step(NewJob.build(type="plain", payload={"customer": 0}), name="first")
        then = Step(NewJob.build(type="plain", payload={"customer": 0}), after=("first",))
        await enqueue_graph(connection, [first, then], registry=registry)

    rows = await _rows(engine, "plain")
    assert len(rows) == 6
    for _, *stored in rows:
        assert tuple(stored) == ("default", 0, int(MAX_ATTEMPTS), None, None, None)
