"""The client over a scripted transport, for the client's tests: a transport answering
each request with the next of a script, a job's record to answer with, and retries
fast enough for a test."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from jobqueue.client import Client, Retries

NOW = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)
RECORD: dict[str, Any] = {
    "id": str(uuid.uuid4()),
    "type": "sleep",
    "queue": "default",
    "priority": 0,
    "payload": {"duration": "1s"},
    "status": "pending",
    "attempts": 0,
    "max_attempts": 5,
    "run_at": NOW.isoformat(),
    "last_error": None,
    "idempotency_key": "k",
    "created_at": NOW.isoformat(),
    "updated_at": NOW.isoformat(),
    "locked_until": None,
    "started_at": None,
    "finished_at": None,
    "history": [],
    "snoozes": 0,
    "unique_key": None,
}
FAST = Retries(attempts=4, base=timedelta(milliseconds=1), cap=timedelta(milliseconds=2))


class Script:
    """A transport answering each request with the next of `answers`: a response's
    (status, body, headers), or an exception to raise."""

    def __init__(self, *answers: tuple[int, Any, dict[str, str]] | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        status, body, headers = answer
        return httpx.Response(status, json=body, headers=headers)


def client(script: Script, **options: Any) -> Client:
    return Client(
        "http://jobs.test/", transport=httpx.MockTransport(script), retries=FAST, **options
    )


def ok(body: Any = None, status: int = 200) -> tuple[int, Any, dict[str, str]]:
    return (status, RECORD if body is None else body, {})


def error(status: int, message: str = "no", **headers: str) -> tuple[int, Any, dict[str, str]]:
    return (status, {"error": message}, {"X-Request-ID": "req-1", **headers})
