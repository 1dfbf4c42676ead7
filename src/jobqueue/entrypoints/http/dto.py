"""What goes over the wire: msgspec Structs for request and response bodies."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Self, TypeVar
from uuid import UUID

import msgspec
from litestar.openapi.spec import Schema
from litestar.openapi.spec.enums import OpenAPIFormat, OpenAPIType

from jobqueue.domain.bulk import MAX_BULK, SELECTABLE, Selection
from jobqueue.domain.job import (
    MAX_ATTEMPTS,
    MAX_DELAY,
    MAX_PRIORITY,
    MAX_QUEUE_LENGTH,
    MAX_TYPE_LENGTH,
    MIN_ATTEMPTS,
    MIN_PRIORITY,
    QUEUE_NAME,
    Job,
    Operation,
)
from jobqueue.domain.queues import QueueState, QueueSummary
from jobqueue.domain.status import Status
from jobqueue.domain.unique import MAX_UNIQUE_KEY_LENGTH

AttemptBudget = Annotated[int, msgspec.Meta(ge=MIN_ATTEMPTS, le=MAX_ATTEMPTS)]
# An instant: a time without an offset would mean a different one on every machine.
Instant = Annotated[datetime, msgspec.Meta(tz=True)]
QueueName = Annotated[str, msgspec.Meta(pattern=f"^{QUEUE_NAME.pattern}$")]
Priority = Annotated[int, msgspec.Meta(ge=MIN_PRIORITY, le=MAX_PRIORITY)]


class UniqueRequest(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """How a submitted job is unique (`domain/unique.py`): all fields optional."""

    # The key as given; absent: derived from the type and the payload (or `by`'s fields).
    key: str | msgspec.UnsetType = msgspec.UNSET
    by: list[str] | msgspec.UnsetType = msgspec.UNSET
    # The statuses the key counts in; absent: pending and processing.
    states: list[Status] | msgspec.UnsetType = msgspec.UNSET
    # At most one job per key per slot of this length (a duration such as "1h").
    period: str | msgspec.UnsetType = msgspec.UNSET


class CreateJobRequest(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """Body of `POST /jobs`. Decoded from the raw bytes by the route, so that every
    refusal carries msgspec's precise message (field, expected type, path)."""

    type: str
    payload: Any = msgspec.field(default_factory=dict)
    # UNSET rather than None: an explicit `null` is a mistake worth reporting, while an
    # absent field means "the server's default".
    max_attempts: AttemptBudget | msgspec.UnsetType = msgspec.UNSET
    # Not before this instant (RFC 3339), or not before this long after the job is stored
    # (a duration such as "90s" or "1h30m", on the database's clock): at most one of them.
    run_at: Instant | msgspec.UnsetType = msgspec.UNSET
    delay: str | msgspec.UnsetType = msgspec.UNSET
    # Absent: the job type's handler option, else the default queue and priority 0.
    queue: QueueName | msgspec.UnsetType = msgspec.UNSET
    priority: Priority | msgspec.UnsetType = msgspec.UNSET
    # One job per key: a duplicate is answered with the job holding the key.
    unique: UniqueRequest | msgspec.UnsetType = msgspec.UNSET


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


class BulkRequest(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """Body of `POST /jobs/retry`, `/jobs/discard` and `/jobs/cancel`: which jobs, at most
    how many."""

    status: Status
    # Absent: any queue, any type.
    queue: QueueName | msgspec.UnsetType = msgspec.UNSET
    type: str | msgspec.UnsetType = msgspec.UNSET
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_BULK)] = MAX_BULK

    def selection(self, operation: Operation) -> Selection:
        """Raises `ValueError` for a selection `operation` may not act on."""
        return Selection(
            self.status,
            queue=None if self.queue is msgspec.UNSET else self.queue,
            type=None if self.type is msgspec.UNSET else self.type,
            limit=self.limit,
            operation=operation,
        )


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

    @classmethod
    def of(cls, job: Job, **given: object) -> Self:
        """The record of `job`; `given` sets the fields a subclass adds."""
        return _view(cls, job, history=[_view(AttemptView, each) for each in job.history], **given)


class SubmittedRecord(JobRecord, frozen=True):
    """What `POST /jobs` answers: the job, and whether it was a duplicate of another."""

    # True when another job held the submission's unique key: this is that job.
    duplicate: bool = False


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


class QueueStateView(msgspec.Struct, frozen=True):
    """A queue's pause, as `POST /queues/{name}/pause|resume` answer it."""

    name: str
    paused: bool
    # When it was paused, by the database's clock; null while it runs.
    paused_at: datetime | None

    @classmethod
    def of(cls, state: QueueState) -> QueueStateView:
        return cls(state.name, state.paused, _utc(state.paused_at))


class QueueRecord(msgspec.Struct, frozen=True):
    """One queue in `GET /queues`."""

    name: str
    paused: bool
    paused_at: datetime | None
    # Jobs per live or held status; finished jobs are history, not counted here.
    jobs: dict[Status, int]
    # Of the pending jobs: due now, and scheduled for later.
    due: int
    scheduled: int
    # How long the longest-waiting due job has been due; null when none is due.
    oldest_due_age_seconds: float | None

    @classmethod
    def of(cls, summary: QueueSummary) -> QueueRecord:
        state, age = summary.state, summary.oldest_due_age
        return cls(
            name=state.name,
            paused=state.paused,
            paused_at=_utc(state.paused_at),
            jobs=dict(summary.counts),
            due=summary.due,
            scheduled=summary.counts[Status.PENDING] - summary.due,
            oldest_due_age_seconds=None if age is None else age.total_seconds(),
        )


class QueueList(msgspec.Struct, frozen=True):
    queues: list[QueueRecord]


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
    return _utc(value) if isinstance(value, datetime) else value


def _utc(moment: datetime | None) -> datetime | None:
    # Times are encoded as RFC 3339 with a `Z`, whatever zone the driver handed back.
    return None if moment is None else moment.astimezone(UTC)


def _queue_schema(description: str) -> Schema:
    return Schema(
        type=OpenAPIType.STRING,
        pattern=f"^{QUEUE_NAME.pattern}$",
        max_length=MAX_QUEUE_LENGTH,
        description=description,
    )


def _type_schema(description: str) -> Schema:
    return Schema(
        type=OpenAPIType.STRING, min_length=1, max_length=MAX_TYPE_LENGTH, description=description
    )


def create_job_request_schema() -> Schema:
    """The OpenAPI schema of `CreateJobRequest`.

    Written out because the route decodes the body itself (for its error messages), so
    Litestar never sees the Struct; a test keeps this schema and the Struct in step.
    """
    return Schema(
        type=OpenAPIType.OBJECT,
        title="CreateJobRequest",
        properties={
            "type": _type_schema("A registered job type, e.g. 'sleep' or 'webhook'."),
            "payload": Schema(
                description="Any JSON value, checked against the handler's payload type. "
                "Defaults to {}.",
            ),
            "max_attempts": Schema(
                type=OpenAPIType.INTEGER,
                minimum=MIN_ATTEMPTS,
                maximum=MAX_ATTEMPTS,
                description="Attempts before the job is dead-lettered; the server's "
                "MAX_ATTEMPTS when absent.",
            ),
            "run_at": Schema(
                type=OpenAPIType.STRING,
                format=OpenAPIFormat.DATE_TIME,
                description="Not before this instant (RFC 3339, with an offset), by the "
                "database's clock; due at once when absent or past. Not with delay.",
            ),
            "queue": _queue_schema(
                "The queue the job waits in; the job type's handler option, "
                "else 'default', when absent."
            ),
            "priority": Schema(
                type=OpenAPIType.INTEGER,
                minimum=MIN_PRIORITY,
                maximum=MAX_PRIORITY,
                description=f"{MIN_PRIORITY} is the most urgent: within a queue, due jobs "
                "are claimed by priority, then due time. The job type's handler option, "
                f"else {MIN_PRIORITY}, when absent.",
            ),
            "delay": Schema(
                type=OpenAPIType.STRING,
                description="Not before this long after the job is stored, by the "
                f"database's clock: a duration such as '90s' or '1h30m', at most "
                f"{MAX_DELAY.days} days. Not with run_at.",
            ),
            "unique": _unique_schema(),
        },
        required=["type"],
        additional_properties=False,
    )


def _unique_schema() -> Schema:
    return Schema(
        type=OpenAPIType.OBJECT,
        title="UniqueRequest",
        description="At most one job per key among the jobs in `states`: a duplicate is "
        "answered 200 with the job holding the key and `duplicate: true`.",
        properties={
            "key": Schema(
                type=OpenAPIType.STRING,
                min_length=1,
                max_length=MAX_UNIQUE_KEY_LENGTH,
                description="The key; absent: derived from the type and the payload.",
            ),
            "by": Schema(
                type=OpenAPIType.ARRAY,
                items=Schema(type=OpenAPIType.STRING),
                description="Derive the key from these payload fields only (with the type).",
            ),
            "states": Schema(
                type=OpenAPIType.ARRAY,
                items=Schema(type=OpenAPIType.STRING, enum=[s.value for s in Status]),
                description="The statuses the key counts in; must include pending and "
                "processing; those two when absent.",
            ),
            "period": Schema(
                type=OpenAPIType.STRING,
                description="At most one job per key per slot of this length, counted "
                "from the Unix epoch by the database's clock, e.g. '1h'.",
            ),
        },
        additional_properties=False,
    )


def bulk_request_schema(operation: Operation) -> Schema:
    """The OpenAPI schema of `BulkRequest` for `operation`, written out for the same
    reason as `create_job_request_schema`; a test keeps the two in step."""
    return Schema(
        type=OpenAPIType.OBJECT,
        title=f"Bulk{operation.value.capitalize()}Request",
        properties={
            "status": Schema(
                type=OpenAPIType.STRING,
                enum=sorted(status.value for status in SELECTABLE[operation]),
                description="Act on jobs of this status.",
            ),
            "queue": _queue_schema("Only jobs of this queue; any when absent."),
            "type": _type_schema("Only jobs of this type; any when absent."),
            "limit": Schema(
                type=OpenAPIType.INTEGER,
                minimum=1,
                maximum=MAX_BULK,
                default=MAX_BULK,
                description="At most this many, the oldest first.",
            ),
        },
        required=["status"],
        additional_properties=False,
    )
