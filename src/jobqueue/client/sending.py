"""The rules both clients follow to send a call (`calls.py`): how its answer is decoded,
which failures are tried again and after how long, and what a failure to reach the
service says (its URL and the reason).

The sync and the async client differ only in how they wait; what an answer means is
written once, here.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

import httpx
import msgspec

from jobqueue.client.calls import Call
from jobqueue.client.errors import BY_STATUS, ApiError, ServiceUnreachable, UnexpectedAnswer
from jobqueue.wire.records import ErrorBody

T = TypeVar("T")


@dataclass(frozen=True)
class Retries:
    """How often, and how far apart, a call is tried again after a 503 or a failed
    connection: full-jitter exponential backoff from `base` to `cap`, and never sooner
    than a `Retry-After` asks."""

    attempts: int = 4  # tries in all; 1: never again
    base: timedelta = timedelta(milliseconds=200)
    cap: timedelta = timedelta(seconds=5)

    def delay(self, tries: int, retry_after: float | None = None) -> float:
        ceiling = min(self.cap.total_seconds(), self.base.total_seconds() * 2**tries)
        return max(retry_after or 0.0, random.uniform(0, ceiling))


def judged(call: Call[T], response: httpx.Response, tries: int, retries: Retries) -> T | float:
    """The decoded answer, or the delay before trying again; raises the status's
    `ApiError` once trying again cannot help."""
    if response.is_success:
        try:
            return msgspec.json.decode(response.content, type=call.answer)
        except (msgspec.DecodeError, msgspec.ValidationError) as error:
            raise UnexpectedAnswer(
                f"{call.method} {call.path}: {response.status_code}, but not an answer of the "
                f"jobqueue API ({error}); is the URL the service's?"
            ) from error
    if response.status_code in call.retried_on and tries + 1 < retries.attempts:
        return retries.delay(tries, _retry_after(response.headers.get("retry-after")))
    raise _error(response)


def after_failure(
    call: Call[Any], error: httpx.TransportError, tries: int, retries: Retries, base_url: str
) -> float:
    """The delay before trying `call` again after `error`; raises `ServiceUnreachable`
    when it must not be (the request may have arrived) or may not be tried any more."""
    # A connection never made sent nothing: any call may go again.
    unsent = isinstance(error, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)
    if (unsent or call.repeatable) and tries + 1 < retries.attempts:
        return retries.delay(tries)
    # The service's URL first: what a person checks (a typo, a port, a service down).
    message = f"cannot reach {base_url} ({_reason(error)}"
    message += f", {tries + 1} tries)" if tries else ")"
    if not unsent and not call.repeatable:
        message += f"; {call.method} {call.path} may have been carried out"
    raise ServiceUnreachable(message) from error


def _reason(error: httpx.TransportError) -> str:
    """Why `error` left no answer, in a few words: the operating system's reason for a
    failed connection ("connection refused", "name or service not known"), or the
    limit a timeout ran out."""
    if isinstance(error, httpx.ConnectTimeout):
        return f"no connection within {_limit(error, 'connect')}"
    if isinstance(error, httpx.ReadTimeout):
        return f"no answer within {_limit(error, 'read')}"
    if isinstance(error, httpx.TimeoutException):
        return f"timed out ({type(error).__name__})"
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror[:1].lower() + cause.strerror[1:]
        cause = cause.__cause__ or cause.__context__
    if isinstance(error, httpx.RemoteProtocolError):
        return f"the connection closed without an answer: {error}"
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _limit(error: httpx.TimeoutException, phase: str) -> str:
    """The time limit of `phase` that `error` ran out, as the client was given it."""
    try:
        limit = error.request.extensions.get("timeout", {}).get(phase)
    except RuntimeError:  # an error made without its request
        limit = None
    return "the time allowed" if limit is None else f"{limit:g}s"


def _error(response: httpx.Response) -> ApiError:
    kind = BY_STATUS.get(response.status_code, ApiError)
    try:
        message = msgspec.json.decode(response.content, type=ErrorBody).error
    except (msgspec.DecodeError, msgspec.ValidationError):
        # Not the service's own answer (a proxy's page): its first line says enough.
        message = response.text.strip().splitlines()[0][:200] if response.text.strip() else ""
    return kind(response.status_code, message, response.headers.get("x-request-id"))


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    if value.strip().isdigit():
        return float(value.strip())
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max((moment - datetime.now(moment.tzinfo)).total_seconds(), 0.0)
