"""Response bodies: a job's record, its status, a page of jobs, workers, periodic jobs, job
types, counts of a bulk action, and the one error body (queues': `queue_records.py`).

A record shows a job's fields by name (`_view`), so a new job field appears in it once
declared here; times are encoded in UTC, durations as text ("1m30s").
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Self, TypeVar
from uuid import UUID

import msgspec

from jobqueue.domain.durations import format_duration
from jobqueue.domain.job import Job
from jobqueue.domain.job_types import KnownType
from jobqueue.domain.processes import LiveProcess
from jobqueue.domain.status import Status


class AttemptView(msgspec.Struct, frozen=True):
    """One attempt of a job, as its `history` shows it."""

    attempt: int
    # retried, completed, failed, dead_letter, lease_expired, or running.
    outcome: str
    error: str | None
    started_at: datetime | None
    # null while it runs.
    finished_at: datetime | None
    # The process that claimed it (host:pid).
    worker: str | None


class ProgressView(msgspec.Struct, frozen=True, omit_defaults=True):
    """How far a running job got, as its handler last said (`ctx.progress`)."""

    # From 0 to 1; given, or done / total.
    fraction: float | None = None
    done: int | None = None
    total: int | None = None
    message: str | None = None
    # When the worker wrote it.
    at: datetime | None = None


class Retried(msgspec.Struct, frozen=True):
    # How many jobs went back to pending; fewer than the limit: none is left.
    retried: int


class Discarded(msgspec.Struct, frozen=True):
    # How many jobs were deleted; fewer than the limit: none is left.
    discarded: int


class Cancelled(msgspec.Struct, frozen=True):
    # How many jobs were cancelled; fewer than the limit: none is left.
    cancelled: int


class JobRecord(msgspec.Struct, frozen=True):
    id: UUID
    type: str
    queue: str
    priority: int
    payload: Any
    status: Status
    attempts: int
    max_attempts: int
    run_at: datetime
    last_error: str | None
    idempotency_key: str | None
    created_at: datetime
    updated_at: datetime
    # While processing: until when the running attempt's lease holds (renewed as it runs).
    locked_until: datetime | None
    # When the latest attempt was claimed; when the job ended (null while live).
    started_at: datetime | None
    finished_at: datetime | None
    # The attempts kept (the last 20), oldest first.
    history: list[AttemptView]
    # How often its handler said not yet (a Snooze): these attempts were given back.
    snoozes: int
    # A unique job's key (with its period's slot); null for a job that is not unique.
    unique_key: str | None
    # How long one attempt may run ("1m30s"); null: the worker's JOB_TIMEOUT. With a
    # default, as every field added later: a client decodes an older service's answers.
    timeout: str | None = None
    # The share of its queue it belongs to (a queue's key_concurrency and key_rate count
    # per key).
    partition_key: str | None = None
    # What its handler returned (JSON), once completed; null in a page of jobs, which
    # leaves results out: read the job for it.
    result: Any = None
    # Its handler's last report of how far it got; kept once it ended.
    progress: ProgressView | None = None
    # The jobs it waits for (null: none), whether it runs even if one does not complete,
    # its workflow, and while waiting how many of them have not ended.
    depends_on: list[UUID] | None = None
    run_anyway: bool = False
    workflow_id: UUID | None = None
    waiting_for: int = 0

    @classmethod
    def of(cls, job: Job, **given: object) -> Self:
        """The record of `job`; `given` sets the fields a subclass adds."""
        history = [_view(AttemptView, each) for each in job.history]
        progress = None if job.progress is None else _view(ProgressView, job.progress)
        return _view(cls, job, history=history, **{"progress": progress, **given})


class SubmittedRecord(JobRecord, frozen=True):
    """What `POST /jobs` answers: the job, and whether it was a duplicate of another or
    a replay of an earlier submission."""

    # True when another job held the submission's unique key: this is that job.
    duplicate: bool = False
    # True when the submission's idempotency key (the Idempotency-Key header, a batch
    # job's idempotency_key) replayed an earlier identical submission: this is its job.
    replayed: bool = False


class BatchItem(SubmittedRecord, frozen=True):
    """One job of a batch's answer: as `POST /jobs` would have answered it."""


class BatchResult(msgspec.Struct, frozen=True):
    # In the order the jobs were sent.
    jobs: list[BatchItem]
    # The batch's callback, when it had one; and its workflow, when its jobs depend on
    # each other (or it had a callback).
    callback: BatchItem | None = None
    workflow_id: UUID | None = None


class WorkflowRecord(msgspec.Struct, frozen=True):
    """What `GET /workflows/{id}` answers: every job of a workflow, in submission order
    (results left out: read a job for its own), and how many are in each status."""

    id: UUID
    counts: dict[Status, int]
    jobs: list[JobRecord]
    # Whether every job ended: completed, or not.
    ended: bool


class WorkflowActed(msgspec.Struct, frozen=True):
    """What a workflow's cancel or retry answers."""

    id: UUID
    # How many jobs were cancelled, or retried.
    count: int


class JobStatusView(msgspec.Struct, frozen=True):
    id: UUID
    status: Status
    attempts: int
    max_attempts: int
    run_at: datetime
    last_error: str | None

    @classmethod
    def of(cls, job: Job) -> JobStatusView:
        return _view(cls, job)


class JobList(msgspec.Struct, frozen=True):
    """One page of `GET /jobs`."""

    jobs: list[JobRecord]
    # Pass it back as `cursor` for the next page; null on the last page.
    next_cursor: str | None


class WorkerView(msgspec.Struct, frozen=True):
    """One live worker process in `GET /workers`."""

    id: UUID
    host: str
    pid: int
    version: str
    # The queues it claims from and the job types it runs.
    queues: list[str]
    types: list[str]
    # How many attempts it may run at once, and ran at its last heartbeat.
    concurrency: int
    running: int
    started_at: datetime
    last_heartbeat_at: datetime
    # How many of `concurrency` each queue has, by queue (absent: a process of an earlier
    # version, which says only its total).
    queue_concurrency: dict[str, int] | msgspec.UnsetType = msgspec.UNSET

    @classmethod
    def of(cls, process: LiveProcess) -> WorkerView:
        info = process.info
        return cls(
            id=info.id,
            host=info.host,
            pid=info.pid,
            version=info.version,
            queues=list(info.queues),
            types=list(info.types),
            concurrency=info.concurrency,
            running=info.running,
            started_at=process.started_at.astimezone(UTC),
            last_heartbeat_at=process.heartbeat_at.astimezone(UTC),
            queue_concurrency=dict(zip(info.queues, info.queue_concurrency, strict=True))
            if info.queue_concurrency
            else msgspec.UNSET,
        )


class WorkerList(msgspec.Struct, frozen=True):
    workers: list[WorkerView]


class PeriodicView(msgspec.Struct, frozen=True):
    name: str
    type: str
    cron: str
    timezone: str
    # The next slot from now, in the schedule's time zone: its job is due then.
    next_run_at: datetime
    catch_up: bool
    # The latest slot whose job was inserted: it is inserted ahead of its slot, so this
    # can be `next_run_at` itself, its job pending until then. Each slot runs at most
    # once, ever; null before the first.
    last_slot_at: datetime | None = None


class PeriodicList(msgspec.Struct, frozen=True):
    periodic: list[PeriodicView]


class UniqueView(msgspec.Struct, frozen=True):
    key: str | None
    by: list[str] | None
    states: list[str]
    # A Go duration ("1h"); None: no period.
    period: str | None


class JobTypeView(msgspec.Struct, frozen=True):
    name: str
    # "local": this process runs or imports its handler and checks payloads by its
    # payload type; "published": known from a worker's publication, checked by the schema.
    source: Literal["local", "published"]
    # The JSON Schema (2020-12) a payload must satisfy; None: any JSON value.
    payload_schema: dict[str, Any] | None
    # What a submission that leaves them out gets.
    queue: str
    priority: int
    max_attempts: int | None
    unique: UniqueView | None
    description: str | None
    # The latest publication by a worker; None for a local type no worker published.
    published_at: datetime | None
    published_by: str | None
    # How long one attempt may run ("30s"); None: the worker's JOB_TIMEOUT.
    timeout: str | None = None
    # The payload fields its jobs' partition key is made of.
    partition_by: list[str] | None = None

    @classmethod
    def of(cls, known: KnownType) -> Self:
        declared = known.type
        options = declared.options
        unique = options.unique
        published = known.published
        return cls(
            name=declared.name,
            source="local" if known.local else "published",
            payload_schema=None
            if declared.payload_schema is None
            else dict(declared.payload_schema),
            queue=options.queue,
            priority=options.priority,
            max_attempts=options.max_attempts,
            timeout=None if options.timeout is None else format_duration(options.timeout),
            partition_by=None if options.partition_by is None else list(options.partition_by),
            unique=None
            if unique is None
            else UniqueView(
                key=unique.key,
                by=None if unique.by is None else list(unique.by),
                states=sorted(status.value for status in unique.states),
                period=None if unique.period is None else format_duration(unique.period),
            ),
            description=declared.description,
            published_at=None if published is None else published.published_at,
            published_by=None if published is None else published.published_by,
        )


class JobTypeList(msgspec.Struct, frozen=True):
    types: list[JobTypeView]


class ErrorBody(msgspec.Struct, frozen=True):
    """Every error response: what went wrong, in words a client can act on."""

    error: str
    # Only on 500s: the id to quote when asking the operator to find the traceback.
    request_id: str | msgspec.UnsetType = msgspec.UNSET


class HealthBody(msgspec.Struct, frozen=True):
    status: str


View = TypeVar("View", bound=msgspec.Struct)


def _view(kind: type[View], source: object, **given: object) -> View:
    """`kind` filled from the fields of the same names of `source` (a job, an attempt),
    but for those `given`: a record shows a new job field once the field is declared on
    it."""
    return kind(
        **{
            name: given[name] if name in given else _shown(getattr(source, name))
            for name in kind.__struct_fields__
        }
    )


def _shown(value: object) -> object:
    if isinstance(value, datetime):
        return utc(value)
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def utc(moment: datetime | None) -> datetime | None:
    # Times are encoded as RFC 3339 with a `Z`, whatever zone the driver handed back.
    return None if moment is None else moment.astimezone(UTC)
