"""The `webhook` example handler: POST a JSON body to a URL (its payload: `webhook_payload`).

Payload: `{"url": "https://example.com/hook", "body": {"order": 42}}` (`body` defaults to
`{}`). The job id goes downstream as `Idempotency-Key`, because delivery is at-least-once
and the receiver is the only one who can drop a duplicate.
"""

from __future__ import annotations

import email.utils
import importlib.metadata
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import msgspec

from jobqueue.adapters.handlers.ssrf import PinnedTransport, Resolve, redacted, resolve_host
from jobqueue.adapters.handlers.webhook_payload import WebhookHandler, WebhookPayload, destination
from jobqueue.domain.errors import Permanent, Transient
from jobqueue.domain.registry import JobContext

# Enough of an error response to tell a reader what the receiver complained about.
_EXCERPT_BYTES = 200


class WebhookRetryable(Transient):
    """A delivery that may succeed later: network failure, timeout, 408, 429 or 5xx.

    `retry_after` is the receiver's `Retry-After` header (delay-seconds or HTTP-date) as
    a delay from the moment the response arrived, or None when the response had none (or
    an unreadable one). It is a floor, not a schedule: the worker may use it so that the
    next attempt comes no sooner than the receiver asked, while still backing off longer
    when its own backoff says so.
    """


__all__ = [
    "WebhookPayload",
    "WebhookRetryable",
    "destination",
    "parse_retry_after",
    "webhook_handler",
]


def webhook_handler(
    *,
    allow_private: bool,
    timeout: timedelta,
    resolve: Resolve = resolve_host,
    inner_transport: Callable[[], httpx.AsyncBaseTransport] | None = None,
) -> WebhookHandler:
    """The `webhook` handler, configured.

    `timeout` bounds each network step (resolve, connect, write, each read) of one
    delivery. `resolve` and `inner_transport` replace DNS and the socket layer in tests.
    """
    if timeout <= timedelta(0):
        raise ValueError("the webhook timeout must be positive")
    timeouts = httpx.Timeout(timeout.total_seconds())
    user_agent = f"jobqueue/{_version()}"

    async def handle_webhook(ctx: JobContext, payload: WebhookPayload) -> None:
        url = _checked_destination(payload.url)
        headers = {
            "Content-Type": "application/json",
            "User-Agent": user_agent,
            "Idempotency-Key": str(ctx.job_id),
            # Only an error response's first bytes are read, and only to quote them:
            # asking for no compression keeps them readable and keeps a small compressed
            # body from inflating into a large one.
            "Accept-Encoding": "identity",
        }
        # A client per delivery: the pinned transport must not pool connections across
        # hostnames (see PinnedTransport), and there is no lifecycle hook to close a
        # shared one.
        transport = PinnedTransport(
            allow_private=allow_private,
            resolve=resolve,
            inner=None if inner_transport is None else inner_transport(),
        )
        async with httpx.AsyncClient(
            transport=transport, timeout=timeouts, follow_redirects=False, trust_env=False
        ) as client:
            try:
                async with client.stream(
                    "POST", url, content=_encoded(payload.body), headers=headers
                ) as response:
                    excerpt = "" if response.is_success else await _excerpt(response)
            except httpx.HTTPError as error:
                raise WebhookRetryable(
                    f"POST {redacted(url)} failed: {_describe(error)}"
                ) from error
        _judge(url, response, excerpt, datetime.now(UTC))

    return handle_webhook


def parse_retry_after(value: str | None, now: datetime) -> timedelta | None:
    """A `Retry-After` header as a delay from `now` (aware); None when absent or unreadable.

    A date in the past means "now": zero.
    """
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        try:
            return timedelta(seconds=int(text))
        except OverflowError:
            return None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        # RFC 5322's "-0000" zone parses as naive; HTTP dates are always GMT.
        when = when.replace(tzinfo=UTC)
    return max(when - now, timedelta(0))


def _checked_destination(text: str) -> httpx.URL:
    try:
        return destination(text)
    except ValueError as error:
        # Only reachable by a payload that skipped validation; retrying cannot fix it.
        raise Permanent(f"cannot call webhook: {error}") from error


def _encoded(body: Any) -> bytes:
    try:
        return msgspec.json.encode(body)
    except TypeError as error:
        raise Permanent(f"webhook body is not JSON: {error}") from error


def _judge(url: httpx.URL, response: httpx.Response, excerpt: str, now: datetime) -> None:
    if response.is_success:
        return
    status = response.status_code
    answer = f"POST {redacted(url)} answered {status} {response.reason_phrase}".rstrip()
    if 300 <= status < 400:
        target = _location(url, response.headers.get("Location"))
        raise Permanent(
            f"{answer}{target}: redirects are not followed, since the new location could "
            "be a private address; point the job at the final URL"
        )
    if status in (408, 429) or 500 <= status < 600:
        # 408 is the receiver giving up on a slow request: as transient as a 503.
        retry_after = parse_retry_after(response.headers.get("Retry-After"), now)
        raise WebhookRetryable(answer + excerpt, retry_after=retry_after)
    raise Permanent(answer + excerpt)


def _location(url: httpx.URL, header: str | None) -> str:
    if not header:
        return ""
    try:
        return f" redirecting to {redacted(url.join(header))}"
    except httpx.InvalidURL:
        return " with an invalid Location"


async def _excerpt(response: httpx.Response) -> str:
    received = bytearray()
    try:
        async for chunk in response.aiter_raw():
            received += chunk
            if len(received) >= _EXCERPT_BYTES:
                break
    except httpx.HTTPError:
        pass  # the status already says what happened; the body was only a bonus
    text = " ".join(received[:_EXCERPT_BYTES].decode("utf-8", "replace").split())
    return f": {text}" if text else ""


def _describe(error: httpx.HTTPError) -> str:
    detail = str(error)
    return f"{type(error).__name__}: {detail}" if detail else type(error).__name__


def _version() -> str:
    try:
        return importlib.metadata.version("jobqueue")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"
