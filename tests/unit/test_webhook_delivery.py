"""The webhook handler's delivery against a real HTTP server on 127.0.0.1: the request it
sends, and what each answer or failure to connect makes of the attempt."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from jobqueue.adapters.handlers.webhook import WebhookRetryable
from jobqueue.domain.errors import Permanent, is_permanent
from jobqueue.domain.fields import JsonValue
from tests.support.webhook_calls import FakeResolver, NoTraffic, deliver, handler
from tests.support.webhook_endpoints import Receiver, closed_port, receiver, silent_port

# Fixtures of tests.support.webhook_endpoints, used by name.
__all__ = ["closed_port", "receiver", "silent_port"]


async def test_posts_the_body_as_json_with_the_job_id_as_idempotency_key(
    receiver: Receiver,
) -> None:
    body: JsonValue = {"order": 42, "items": ["a", "b"], "note": None}

    ctx = await deliver(handler(allow_private=True), receiver.url("/hook"), body)

    [request] = receiver.received()
    assert request.path == "/hook"
    assert json.loads(request.body) == body
    assert request.headers["Idempotency-Key"] == str(ctx.job_id)
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["User-Agent"].startswith("jobqueue/")


async def test_sends_an_empty_object_when_the_payload_has_no_body(receiver: Receiver) -> None:
    await deliver(handler(allow_private=True), receiver.url())

    [request] = receiver.received()
    assert json.loads(request.body) == {}


@pytest.mark.parametrize("status", [200, 201, 202, 204])
async def test_any_2xx_answer_is_success(receiver: Receiver, status: int) -> None:
    receiver.answer("/hook", status)

    await deliver(handler(allow_private=True), receiver.url("/hook"))

    assert len(receiver.received()) == 1


async def test_429_is_retryable_and_carries_retry_after(receiver: Receiver) -> None:
    receiver.answer("/hook", 429, {"Retry-After": "7"}, b"slow down")

    with pytest.raises(WebhookRetryable) as raised:
        await deliver(handler(allow_private=True), receiver.url("/hook"))

    assert raised.value.retry_after == timedelta(seconds=7)
    assert "answered 429 Too Many Requests: slow down" in str(raised.value)
    assert not is_permanent(raised.value)


@pytest.mark.parametrize("status", [500, 502, 503, 408])
async def test_5xx_and_408_are_retryable_without_retry_after(
    receiver: Receiver, status: int
) -> None:
    receiver.answer("/hook", status)

    with pytest.raises(WebhookRetryable) as raised:
        await deliver(handler(allow_private=True), receiver.url("/hook"))

    assert f"answered {status}" in str(raised.value)
    assert raised.value.retry_after is None
    assert not is_permanent(raised.value)


async def test_503_honours_an_http_date_retry_after(receiver: Receiver) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    receiver.answer("/hook", 503, {"Retry-After": later.strftime("%a, %d %b %Y %H:%M:%S GMT")})

    with pytest.raises(WebhookRetryable) as raised:
        await deliver(handler(allow_private=True), receiver.url("/hook"))

    assert raised.value.retry_after is not None
    assert timedelta(minutes=50) < raised.value.retry_after <= timedelta(hours=1)


@pytest.mark.parametrize(
    ("status", "reason"), [(400, "Bad Request"), (404, "Not Found"), (422, "Unprocessable")]
)
async def test_other_4xx_fail_permanently_quoting_the_answer(
    receiver: Receiver, status: int, reason: str
) -> None:
    receiver.answer("/hook", status, body=b'{"error": "no such hook"}')

    with pytest.raises(Permanent) as raised:
        await deliver(handler(allow_private=True), receiver.url("/hook"))

    message = str(raised.value)
    assert f"POST {receiver.url('/hook')} answered {status} {reason}" in message
    assert message.endswith('{"error": "no such hook"}')


async def test_a_redirect_is_not_followed_and_fails_permanently(receiver: Receiver) -> None:
    receiver.answer("/hook", 302, {"Location": "/elsewhere"})

    with pytest.raises(Permanent) as raised:
        await deliver(handler(allow_private=True), receiver.url("/hook"))

    assert [request.path for request in receiver.received()] == ["/hook"]
    assert f"302 Found redirecting to {receiver.url('/elsewhere')}" in str(raised.value)
    assert "redirects are not followed" in str(raised.value)


async def test_a_refused_connection_is_retryable(closed_port: int) -> None:
    with pytest.raises(WebhookRetryable) as raised:
        await deliver(handler(allow_private=True), f"http://127.0.0.1:{closed_port}/hook")

    assert "ConnectError" in str(raised.value)
    assert raised.value.retry_after is None


async def test_a_receiver_that_never_answers_times_out_retryably(silent_port: int) -> None:
    handle = handler(allow_private=True, timeout=timedelta(milliseconds=200))

    with pytest.raises(WebhookRetryable) as raised:
        await deliver(handle, f"http://127.0.0.1:{silent_port}/hook")

    assert "ReadTimeout" in str(raised.value)


async def test_a_name_that_does_not_resolve_is_retryable() -> None:
    resolve = FakeResolver()

    with pytest.raises(WebhookRetryable) as raised:
        await deliver(
            handler(allow_private=False, resolve=resolve, network=NoTraffic()),
            "https://gone.test/hook",
        )

    assert "cannot resolve gone.test" in str(raised.value)
    assert resolve.lookups == [("gone.test", 443)]


async def test_error_messages_leave_out_credentials_and_query(closed_port: int) -> None:
    url = f"http://user:secret@127.0.0.1:{closed_port}/hook?token=hunter2"

    with pytest.raises(WebhookRetryable) as raised:
        await deliver(handler(allow_private=True), url)

    assert f"POST http://127.0.0.1:{closed_port}/hook failed" in str(raised.value)
    assert "secret" not in str(raised.value)
    assert "hunter2" not in str(raised.value)
