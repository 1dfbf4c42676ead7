"""Every call of the API as data (`Call`), and the rules both clients follow to send one:
how its answer is decoded, which failures are tried again and after how long.

The sync and the async client differ only in how they wait; what a call is, and what
an answer means, is written once, here.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote
from uuid import UUID

import httpx
import msgspec
from msgspec.structs import replace

from jobqueue.client.errors import BY_STATUS, ApiError, ServiceUnreachable, UnexpectedAnswer
from jobqueue.domain.durations import format_duration
from jobqueue.domain.errors import NotEnded
from jobqueue.domain.status import LIVE, Status
from jobqueue.wire.action_requests import RescheduleRequest
from jobqueue.wire.queue_records import QueueList, QueueStateView
from jobqueue.wire.queue_requests import QueueLimitsRequest
from jobqueue.wire.records import (
    BatchResult,
    Cancelled,
    Discarded,
    ErrorBody,
    HealthBody,
    JobList,
    JobRecord,
    JobStatusView,
    JobTypeList,
    PeriodicList,
    Retried,
    SubmittedRecord,
    WorkerList,
)
from jobqueue.wire.requests import BatchJob

T = TypeVar("T")

_IDEMPOTENCY_KEY = "Idempotency-Key"
# Statuses a proxy or the service answers when trying again later may succeed.
_TRANSIENT = frozenset({502, 503, 504})


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request, and the Struct its successful answer decodes into."""

    method: str
    path: str
    answer: type[T]
    body: Any = None
    params: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    # Whether sending it again after a broken connection is harmless: reads, submissions
    # (their Idempotency-Key replays the first), a single job's retry or cancel (a second
    # is a 409). Not so a bulk action, which would act on more jobs.
    repeatable: bool = True
    # The statuses after which it is tried again.
    retried_on: frozenset[int] = _TRANSIENT
    # Seconds the service may hold the answer back on purpose (a long poll's): added to
    # the client's timeout for this request.
    held: float = 0.0

    def encoded(self) -> bytes | None:
        return None if self.body is None else msgspec.json.encode(self.body)


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


# --- the calls ------------------------------------------------------------------------------


def submit(job: BatchJob) -> Call[SubmittedRecord]:
    # The key goes in the header; the body is what POST /jobs takes without it.
    key = _new_key() if job.idempotency_key is msgspec.UNSET else job.idempotency_key
    body = replace(job, idempotency_key=msgspec.UNSET)
    return Call("POST", "/jobs", SubmittedRecord, body=body, headers={_IDEMPOTENCY_KEY: key})


def submit_batch(jobs: Sequence[BatchJob]) -> Call[BatchResult]:
    # Every job gets a key, so that the batch can be sent again after a broken connection
    # and replay rather than double.
    keyed = [
        job
        if job.idempotency_key is not msgspec.UNSET
        else replace(job, idempotency_key=_new_key())
        for job in jobs
    ]
    return Call("POST", "/jobs/batch", BatchResult, body={"jobs": keyed})


def job(job_id: UUID | str) -> Call[JobRecord]:
    return Call("GET", f"/jobs/{_segment(job_id)}", JobRecord)


def status(job_id: UUID | str) -> Call[JobStatusView]:
    return Call("GET", f"/jobs/{_segment(job_id)}/status", JobStatusView)


def jobs(
    status: Status | str,
    *,
    job_type: str | None = None,
    queue: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[JobList]:
    given = {"status": str(status), "type": job_type, "queue": queue, "limit": limit}
    params = {name: str(value) for name, value in given.items() if value is not None}
    if cursor is not None:
        params["cursor"] = cursor
    return Call("GET", "/jobs", JobList, params=params)


def wait(job_id: UUID | str, within: float) -> Call[JobRecord]:
    timeout = format_duration(timedelta(seconds=within))
    path = f"/jobs/{_segment(job_id)}/wait"
    return Call("GET", path, JobRecord, params={"timeout": timeout}, held=within)


# The longest the service holds one wait (`GET /jobs/{id}/wait`): a longer wait is several.
LONGEST_POLL = 60.0


class Waiting:
    """A client's wait for a job's end, as long polls of at most `LONGEST_POLL` each;
    `timeout` None waits as long as it takes. Both clients send `next_call` until it is
    None, then take `answer`."""

    def __init__(self, job_id: UUID | str, timeout: float | None, clock: Callable[[], float]):
        if timeout is not None and timeout < 0:
            raise ValueError(f"a wait's timeout cannot be negative, got {timeout}")
        self._job_id = job_id
        self._timeout = timeout
        self._clock = clock
        self._deadline = None if timeout is None else clock() + timeout

    def next_call(self, last: JobRecord | None) -> Call[JobRecord] | None:
        left = LONGEST_POLL if self._deadline is None else self._deadline - self._clock()
        if last is not None and (last.status not in LIVE or left <= 0):
            return None
        return wait(self._job_id, round(min(max(left, 0.0), LONGEST_POLL), 3))

    def answer(self, last: JobRecord | None) -> JobRecord:
        """The ended job's record; raises `NotEnded` when time ran out first."""
        assert last is not None, "next_call asks once at least"
        if last.status in LIVE:
            raise NotEnded(last.id, last.status, self._timeout or 0.0)
        return last


def retry(job_id: UUID | str) -> Call[JobRecord]:
    return Call("POST", f"/jobs/{_segment(job_id)}/retry", JobRecord)


def cancel(job_id: UUID | str) -> Call[JobRecord]:
    return Call("POST", f"/jobs/{_segment(job_id)}/cancel", JobRecord)


def run_now(job_id: UUID | str) -> Call[JobRecord]:
    return Call("POST", f"/jobs/{_segment(job_id)}/run-now", JobRecord)


def reschedule(
    job_id: UUID | str, run_at: datetime | None, delay: timedelta | str | None
) -> Call[JobRecord]:
    body = RescheduleRequest(
        run_at=msgspec.UNSET if run_at is None else run_at,
        delay=msgspec.UNSET
        if delay is None
        else format_duration(delay)
        if isinstance(delay, timedelta)
        else delay,
    )
    return Call("POST", f"/jobs/{_segment(job_id)}/reschedule", JobRecord, body=body)


def delete(job_id: UUID | str) -> Call[JobRecord]:
    # Not sent again after a request that may have arrived: its second answer, a 404,
    # would hide that the first one deleted the job.
    return Call("DELETE", f"/jobs/{_segment(job_id)}", JobRecord, repeatable=False)


def _selection(
    status: Status | str, queue: str | None, job_type: str | None, limit: int | None
) -> dict[str, object]:
    given = {"status": str(status), "queue": queue, "type": job_type, "limit": limit}
    return {name: value for name, value in given.items() if value is not None}


def retry_many(
    status: Status | str, queue: str | None, job_type: str | None, limit: int | None
) -> Call[Retried]:
    body = _selection(status, queue, job_type, limit)
    return Call("POST", "/jobs/retry", Retried, body=body, repeatable=False)


def discard_many(
    status: Status | str, queue: str | None, job_type: str | None, limit: int | None
) -> Call[Discarded]:
    body = _selection(status, queue, job_type, limit)
    return Call("POST", "/jobs/discard", Discarded, body=body, repeatable=False)


def cancel_many(
    status: Status | str, queue: str | None, job_type: str | None, limit: int | None
) -> Call[Cancelled]:
    body = _selection(status, queue, job_type, limit)
    return Call("POST", "/jobs/cancel", Cancelled, body=body, repeatable=False)


def queues() -> Call[QueueList]:
    return Call("GET", "/queues", QueueList)


def pause(name: str) -> Call[QueueStateView]:
    return Call("POST", f"/queues/{_segment(name)}/pause", QueueStateView)


def resume(name: str) -> Call[QueueStateView]:
    return Call("POST", f"/queues/{_segment(name)}/resume", QueueStateView)


def set_limits(
    name: str,
    concurrency: int | None,
    rate: str | None,
    key_concurrency: int | None,
    key_rate: str | None,
    type_rates: Mapping[str, str] | None,
) -> Call[QueueStateView]:
    body = QueueLimitsRequest(
        concurrency=concurrency,
        rate=rate,
        key_concurrency=key_concurrency,
        key_rate=key_rate,
        type_rates=None if type_rates is None else dict(type_rates),
    )
    return Call("PUT", f"/queues/{_segment(name)}/limits", QueueStateView, body=body)


def lift_limits(name: str) -> Call[QueueStateView]:
    return Call("DELETE", f"/queues/{_segment(name)}/limits", QueueStateView)


def periodic() -> Call[PeriodicList]:
    return Call("GET", "/periodic", PeriodicList)


def workers() -> Call[WorkerList]:
    return Call("GET", "/workers", WorkerList)


def types() -> Call[JobTypeList]:
    return Call("GET", "/types", JobTypeList)


def health() -> Call[HealthBody]:
    return Call("GET", "/healthz", HealthBody)


def ready() -> Call[HealthBody]:
    # Its 503 says "not now", which the caller asked about: not tried again.
    return Call("GET", "/readyz", HealthBody, retried_on=frozenset())


# --- building bodies --------------------------------------------------------------------


def _segment(value: UUID | str) -> str:
    """`value` as one segment of a path: an id or a name given by a person ("../queues",
    "a/b") reaches the route it was meant for, whose answer says what is wrong with it,
    never another route."""
    quoted = quote(str(value), safe="")
    # Whole dot segments would be resolved away by the URL ("/jobs/.." is "/").
    return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted


def _new_key() -> str:
    return uuid.uuid4().hex
