"""The webhook handler called as a worker calls it, over fakes for DNS (a table) and for
the socket layer (a transport where a request must never be sent)."""

from __future__ import annotations

import logging
import socket
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import httpx

from jobqueue.adapters.handlers.webhook import WebhookPayload, webhook_handler
from jobqueue.adapters.handlers.webhook_payload import WebhookHandler
from jobqueue.adapters.payloads import MsgspecPayloadDecoder
from jobqueue.domain.fields import JsonValue
from jobqueue.domain.registry import JobContext


class FakeResolver:
    """DNS as a table; records every lookup."""

    def __init__(self, table: dict[str, list[str]] | None = None) -> None:
        self.table = table or {}
        self.lookups: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append((host, port))
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self.table[host]


class NoTraffic(httpx.AsyncBaseTransport):
    """Stands in for the network where a request must never be sent."""

    def __init__(self) -> None:
        self.attempts: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.attempts.append(request)
        raise AssertionError(f"a request was sent to {request.url}")


def context() -> JobContext:
    return JobContext(
        job_id=uuid4(),
        job_type="webhook",
        attempt=1,
        max_attempts=3,
        deadline=datetime.now(UTC) + timedelta(minutes=5),
        logger=logging.getLogger("test.webhook"),
    )


def payload(value: JsonValue) -> WebhookPayload:
    decoded: WebhookPayload = MsgspecPayloadDecoder().decode("webhook", value, WebhookPayload)
    return decoded


def handler(
    *,
    allow_private: bool,
    resolve: FakeResolver | None = None,
    network: httpx.AsyncBaseTransport | None = None,
    timeout: timedelta = timedelta(seconds=30),
) -> WebhookHandler:
    return webhook_handler(
        allow_private=allow_private,
        timeout=timeout,
        **({} if resolve is None else {"resolve": resolve}),
        inner_transport=None if network is None else (lambda: network),
    )


async def deliver(handle: WebhookHandler, url: str, body: JsonValue = None) -> JobContext:
    ctx = context()
    value: dict[str, JsonValue] = {"url": url}
    if body is not None:
        value["body"] = body
    await handle(ctx, payload(value))
    return ctx
