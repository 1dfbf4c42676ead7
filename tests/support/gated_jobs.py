"""Jobs whose outcome a test controls, and waiting for a job's status over HTTP."""

from __future__ import annotations

from typing import Any

import httpx

from jobqueue.domain.errors import Permanent
from jobqueue.domain.registry import JobContext, Registry
from tests.support.api import eventually

RECORD_FIELDS = {
    "id",
    "type",
    "queue",
    "priority",
    "payload",
    "status",
    "attempts",
    "max_attempts",
    "run_at",
    "last_error",
    "idempotency_key",
    "created_at",
    "updated_at",
    "locked_until",
    "started_at",
    "finished_at",
    "history",
    "snoozes",
    "unique_key",
    "timeout",
    "partition_key",
    "result",
    "progress",
    "depends_on",
    "run_anyway",
    "workflow_id",
    "waiting_for",
}


class Gate:
    """A handler that fails (retryably) until the test opens the gate."""

    def __init__(self) -> None:
        self.open = False

    async def __call__(self, ctx: JobContext, payload: Any) -> None:
        if not self.open:
            raise RuntimeError("gate closed")


def handlers_for(gate: Gate) -> Registry:
    registry = Registry()
    registry.handler("gated")(gate)

    @registry.handler("broken")
    async def broken(ctx: JobContext, payload: Any) -> None:
        raise Permanent("broken on purpose")

    return registry


async def status_of(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    response = await client.get(f"/jobs/{job_id}/status")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def wait_for_status(client: httpx.AsyncClient, job_id: str, status: str) -> dict[str, Any]:
    return await eventually(lambda: status_of(client, job_id), lambda s: s["status"] == status)
