"""The OpenAPI schemas of the request bodies the routes decode by hand (`dto.py`'s
Structs, which Litestar never sees): written out here, and kept in step with the Structs
by tests."""

from __future__ import annotations

from litestar.openapi.spec import Schema
from litestar.openapi.spec.enums import OpenAPIFormat, OpenAPIType

from jobqueue.domain.bulk import MAX_BATCH, MAX_BULK, SELECTABLE
from jobqueue.domain.fields import (
    MAX_ATTEMPTS,
    MAX_DELAY,
    MAX_IDEMPOTENCY_KEY_LENGTH,
    MAX_PRIORITY,
    MAX_QUEUE_LENGTH,
    MAX_TYPE_LENGTH,
    MIN_ATTEMPTS,
    MIN_PRIORITY,
    QUEUE_NAME,
)
from jobqueue.domain.status import Status
from jobqueue.domain.transitions import Operation
from jobqueue.domain.unique import MAX_UNIQUE_KEY_LENGTH


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


def batch_request_schema() -> Schema:
    """The OpenAPI schema of `BatchRequest`, written out for the same reason as
    `create_job_request_schema`, whose jobs it holds; a test keeps the two in step."""
    job = create_job_request_schema()
    job.title = "BatchJob"
    job.properties = {
        **(job.properties or {}),
        "idempotency_key": Schema(
            type=OpenAPIType.STRING,
            min_length=1,
            max_length=MAX_IDEMPOTENCY_KEY_LENGTH,
            description="This job's Idempotency-Key: the same key with the same job "
            "replays the first job (`replayed: true`); with a different job, the batch "
            "is refused (409).",
        ),
    }
    return Schema(
        type=OpenAPIType.OBJECT,
        title="BatchRequest",
        properties={
            "jobs": Schema(
                type=OpenAPIType.ARRAY,
                items=job,
                min_items=1,
                max_items=MAX_BATCH,
                description=f"1 to {MAX_BATCH} jobs, stored all together or not at all.",
            ),
        },
        required=["jobs"],
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
