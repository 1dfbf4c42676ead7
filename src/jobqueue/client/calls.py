"""Every call of the API as data (`Call`): its method, path, body, and whether sending it
again is harmless; and the answers both clients hand back (`Batch`). How a call is sent,
its answer decoded and its failures tried again is `sending.py`'s.

The sync and the async client differ only in how they wait; what a call is, is written
once, here.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar
from urllib.parse import quote
from uuid import UUID

import msgspec

from jobqueue.domain.durations import format_duration
from jobqueue.domain.errors import NotEnded
from jobqueue.domain.status import LIVE, Status
from jobqueue.wire.action_requests import RescheduleRequest
from jobqueue.wire.queue_records import QueueList, QueueStateView
from jobqueue.wire.queue_requests import QueueLimitsRequest
from jobqueue.wire.records import (
    BatchItem,
    BatchResult,
    Cancelled,
    Discarded,
    HealthBody,
    JobList,
    JobRecord,
    JobStatusView,
    JobTypeList,
    PeriodicList,
    Retried,
    SubmittedRecord,
    WorkerList,
    WorkflowActed,
    WorkflowRecord,
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
    # is a 409). Not so a bulk action or a workflow's, which would act on more jobs, nor
    # a graph's submission, which carries no key.
    repeatable: bool = True
    # The statuses after which it is tried again.
    retried_on: frozenset[int] = _TRANSIENT
    # Seconds the service may hold the answer back on purpose (a long poll's): added to
    # the client's timeout for this request.
    held: float = 0.0

    def encoded(self) -> bytes | None:
        return None if self.body is None else msgspec.json.encode(self.body)


# --- the calls ------------------------------------------------------------------------------


def submit(job: BatchJob) -> Call[SubmittedRecord]:
    """`POST /jobs`. The key goes in the header, and the body is what POST /jobs takes
    without it. A job that depends on others takes no key (the service refuses one: its
    key's earlier job would not be the one its dependencies name), so it gets none unless
    given, and is not sent again once it may have arrived."""
    body = _job_body(job)
    key = body.pop("idempotency_key", None)
    if key is None and job.depends_on:
        return Call("POST", "/jobs", SubmittedRecord, body=body, repeatable=False)
    headers = {_IDEMPOTENCY_KEY: _new_key() if key is None else key}
    return Call("POST", "/jobs", SubmittedRecord, body=body, headers=headers)


def submit_batch(jobs: Sequence[BatchJob], callback: BatchJob | None = None) -> Call[BatchResult]:
    """`POST /jobs/batch`. Every job gets a key, so that the batch can be sent again after
    a broken connection and replay rather than double; but not a graph's (jobs naming or
    depending on others, or a callback), which take none: such a batch is sent once."""
    graph = callback is not None or any(
        job.depends_on or job.name is not msgspec.UNSET for job in jobs
    )
    bodies = [_job_body(job) for job in jobs]
    if not graph:
        for body in bodies:
            body.setdefault("idempotency_key", _new_key())
    sent: dict[str, Any] = {"jobs": bodies}
    if callback is not None:
        sent["callback"] = _job_body(callback)
    return Call("POST", "/jobs/batch", BatchResult, body=sent, repeatable=not graph)


class Batch(list[BatchItem]):
    """What both clients' `submit_batch` return: the batch's jobs, in the order sent (a
    list, as it always was), with the batch's `callback` (None without one) and its
    `workflow_id` (None unless its jobs depend on each other or it has a callback)."""

    def __init__(
        self,
        jobs: Iterable[BatchItem] = (),
        callback: BatchItem | None = None,
        workflow_id: UUID | None = None,
    ) -> None:
        super().__init__(jobs)
        self.callback = callback
        self.workflow_id = workflow_id

    @classmethod
    def of(cls, answer: BatchResult) -> Batch:
        return cls(answer.jobs, answer.callback, answer.workflow_id)


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


def workflow(workflow_id: UUID | str) -> Call[WorkflowRecord]:
    return Call("GET", f"/workflows/{_segment(workflow_id)}", WorkflowRecord)


# A workflow's cancel and retry act on every job of it that is live, or ended without
# completing, at the time: sent again, they would act on what changed since.
def cancel_workflow(workflow_id: UUID | str) -> Call[WorkflowActed]:
    path = f"/workflows/{_segment(workflow_id)}/cancel"
    return Call("POST", path, WorkflowActed, repeatable=False)


def retry_workflow(workflow_id: UUID | str) -> Call[WorkflowActed]:
    path = f"/workflows/{_segment(workflow_id)}/retry"
    return Call("POST", path, WorkflowActed, repeatable=False)


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


def _job_body(job: BatchJob) -> dict[str, Any]:
    """`job` as the API's body holds it, without the fields it leaves at their defaults
    that a service of an earlier version does not know (it refuses unknown fields): a
    job without dependencies is sent as it always was."""
    body: dict[str, Any] = msgspec.to_builtins(job)
    if not body.get("depends_on"):
        body.pop("depends_on", None)
    if not body.get("run_anyway"):
        body.pop("run_anyway", None)
    return body


def _new_key() -> str:
    return uuid.uuid4().hex
