"""What the routes of the API declare about their parameters and errors, for the OpenAPI
document: a job id, the Idempotency-Key header, the listing's query parameters, and an
error response. The routes parse the query string and the id themselves (`listing.py`,
`parse_job_id`), so that every refusal is a 400 saying exactly what to change."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any
from uuid import UUID

from litestar.exceptions import ClientException
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import HeaderParameter, PathParameter, QueryParameter

from jobqueue.adapters.postgres.endings import MAX_WAIT
from jobqueue.domain.durations import format_duration, parse_duration
from jobqueue.domain.fields import MAX_QUEUE_LENGTH, MAX_TYPE_LENGTH, QUEUE_NAME
from jobqueue.domain.listing import DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT, MIN_LIST_LIMIT
from jobqueue.domain.status import BY_QUEUE, TRAITS, Status
from jobqueue.wire.records import ErrorBody

JobId = Annotated[
    str, PathParameter(description="The job's id, a UUID.", schema_extra={"format": "uuid"})
]
IdempotencyKey = Annotated[
    str | None,
    HeaderParameter(
        name="Idempotency-Key",
        required=False,
        description="Makes retries of this request safe: the same key with the same "
        "request returns the first job (200); with a different request, 409.",
    ),
]

# Declared as plain strings, for the OpenAPI document only: `list_jobs` parses the query
# string itself, so that every refusal is a 400 saying exactly what to change.
ListStatus = Annotated[
    str | None,
    QueryParameter(
        name="status",
        required=True,
        description="Required: list jobs of this status. Order: "
        + "; ".join(
            f"{status.value} by {''.join(f'{g}, ' for g in order.groups)}{order.column.value} "
            f"{'newest' if order.descending else 'soonest'} first"
            for status, order in ((s, TRAITS[s].order) for s in Status)
        )
        + "; ties by id.",
        schema_extra={"enum": [status.value for status in Status]},
    ),
]
ListType = Annotated[
    str | None,
    QueryParameter(
        name="type",
        required=False,
        description="Only jobs of this type.",
        schema_extra={"minLength": 1, "maxLength": MAX_TYPE_LENGTH},
    ),
]
ListQueue = Annotated[
    str | None,
    QueryParameter(
        name="queue",
        required=False,
        description="Only jobs of this queue; only with status="
        + ", ".join(status.value for status in BY_QUEUE)
        + " (no index holds the others by queue).",
        schema_extra={"pattern": f"^{QUEUE_NAME.pattern}$", "maxLength": MAX_QUEUE_LENGTH},
    ),
]
# `Any`, so that the schema is only what is written here: an optional `str` would add a
# `oneOf: [string, null]` that no integer, not even the default, satisfies.
ListLimit = Annotated[
    Any,
    QueryParameter(
        name="limit",
        required=False,
        description=f"Jobs per page, {MIN_LIST_LIMIT} to {MAX_LIST_LIMIT}; "
        f"{DEFAULT_LIST_LIMIT} when absent.",
        schema_extra={
            "type": "integer",
            "minimum": MIN_LIST_LIMIT,
            "maximum": MAX_LIST_LIMIT,
            "default": DEFAULT_LIST_LIMIT,
        },
    ),
]
ListCursor = Annotated[
    str | None,
    QueryParameter(
        name="cursor",
        required=False,
        description="The previous page's next_cursor, unchanged, for the page after it.",
    ),
]


def error_spec(description: str) -> ResponseSpec:
    """An error response as the OpenAPI document shows it."""
    return ResponseSpec(ErrorBody, description=description, generate_examples=False)


INVALID_ID = error_spec("The job id is not a UUID")
UNKNOWN_JOB = error_spec("No job has this id")
STORE_DOWN = error_spec("The job store is unavailable; retry later")


def parse_job_id(raw: str) -> UUID:
    return parse_uuid(raw, "job id")


def parse_uuid(raw: str, what: str) -> UUID:
    """`raw` as a UUID; a 400 saying `what` must be one, showing what came (cut short)."""
    try:
        return UUID(raw)
    except ValueError:
        shown = raw if len(raw) <= 64 else raw[:64] + "…"
        raise ClientException(detail=f"{what} must be a UUID, got {shown!r}") from None


# A long poll's bound: short enough for proxies that cut idle responses at a minute.
DEFAULT_WAIT = timedelta(seconds=30)
WaitTimeout = Annotated[
    str | None,
    QueryParameter(
        name="timeout",
        required=False,
        description=f"How long to wait for the job's end: a duration from 0s to "
        f"{format_duration(MAX_WAIT)} (default {format_duration(DEFAULT_WAIT)}). The answer "
        "is the job as it is then, ended or not: look at its status.",
    ),
]


def parse_wait(raw: str | None) -> timedelta:
    """A wait's `timeout` parameter; a 400 saying what to send when it is no duration
    from 0 to `MAX_WAIT`."""
    if raw is None:
        return DEFAULT_WAIT
    try:
        within = parse_duration(raw)
    except ValueError as error:
        raise ClientException(detail=f"timeout: {error}") from None
    if within > MAX_WAIT:
        raise ClientException(
            detail=f"timeout: at most {format_duration(MAX_WAIT)}, got {raw!r}; wait again "
            "for longer"
        )
    return within
