"""The webhook's payload as it is decoded and checked, and its reading of Retry-After."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from jobqueue.adapters.handlers.webhook import WebhookPayload, parse_retry_after
from jobqueue.domain.errors import InvalidPayload, Permanent
from jobqueue.domain.fields import JsonValue
from tests.support.webhook_calls import NoTraffic, context, handler, payload


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({"url": "ftp://example.com/"}, "url must start with http:// or https://, not ftp://"),
        ({"url": "example.com/hook"}, "url must start with http:// or https://"),
        ({"url": "http://example.com:port/"}, "url is not a valid URL"),
        ({"url": 5}, "Expected `str`, got `int` - at `$.url`"),
        ({"body": {}}, "Object missing required field `url`"),
        ({"url": "https://example.com/", "method": "PUT"}, "unknown field `method`"),
    ],
)
def test_refuses_invalid_payloads_when_decoding(value: JsonValue, reason: str) -> None:
    with pytest.raises(InvalidPayload) as raised:
        payload(value)

    assert reason in raised.value.reason


def test_accepts_any_json_body() -> None:
    decoded = payload({"url": "https://example.com/", "body": [1, "two", {"three": None}]})

    assert decoded.body == [1, "two", {"three": None}]


async def test_an_invalid_url_that_bypassed_validation_fails_permanently() -> None:
    bypassed = WebhookPayload(url="https://example.com/")
    msgspec.structs.force_setattr(bypassed, "url", "file:///etc/passwd")
    network = NoTraffic()

    with pytest.raises(Permanent) as raised:
        await handler(allow_private=False, network=network)(context(), bypassed)

    assert "url must start with http:// or https://" in str(raised.value)
    assert network.attempts == []


NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("header", "delay"),
    [
        ("7", timedelta(seconds=7)),
        (" 120 ", timedelta(minutes=2)),
        ("Wed, 01 Jan 2025 12:01:30 GMT", timedelta(seconds=90)),
        ("Wed, 01 Jan 2025 11:00:00 GMT", timedelta(0)),
        ("-5", None),
        ("soon", None),
        ("1.5", None),
        ("", None),
        (None, None),
    ],
)
def test_reads_retry_after_as_seconds_or_http_date(
    header: str | None, delay: timedelta | None
) -> None:
    assert parse_retry_after(header, NOW) == delay
