"""The request bodies the routes decode themselves, so that every refusal is a 400 carrying
msgspec's own message (the field, what was expected, where): how each is decoded, and
how its route documents it (a reference to its generated schema, `request_schemas.py`,
with an example)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import msgspec
from litestar.exceptions import ClientException
from litestar.openapi.spec import OpenAPIMediaType, Operation, RequestBody

from jobqueue.domain.bulk import Selection
from jobqueue.domain.flow import QueueLimits
from jobqueue.domain.transitions import Operation as JobOperation
from jobqueue.entrypoints.http.request_schemas import bulk_request, reference
from jobqueue.wire.action_requests import BulkRequest, RescheduleRequest
from jobqueue.wire.queue_requests import QueueLimitsRequest
from jobqueue.wire.requests import BatchRequest, CreateJobRequest

_EXAMPLE_BODY = '{"type": "sleep", "payload": {"duration": "2s"}, "max_attempts": 3}'
_EXAMPLE_BATCH = (
    '{"jobs": [{"type": "sleep", "payload": {"duration": "2s"}, "idempotency_key": "a-1"}, '
    '{"type": "sleep", "payload": {"duration": "5s"}}]}'
)
_EXAMPLE_RESCHEDULE = '{"run_at": "2026-12-24T18:00:00Z"} or {"delay": "10m"}'
_EXAMPLE_LIMITS = '{"concurrency": 5, "rate": "100/1m"}'
_EXAMPLE_BULK = {
    JobOperation.RETRY: '{"status": "dead_letter", "queue": "emails", "limit": 100}',
    JobOperation.CANCEL: '{"status": "pending", "type": "send_email", "limit": 100}',
}


def _bulk_body(operation: JobOperation) -> RequestBody:
    return RequestBody(
        required=True,
        description=f"Which jobs, e.g. {_EXAMPLE_BULK[operation]}",
        content={"application/json": OpenAPIMediaType(schema=reference(bulk_request(operation)))},
    )


@dataclass
class BulkOperation(Operation):
    """Documents the body that `retry_many` and `discard_many` decode by hand."""

    def __post_init__(self) -> None:
        self.request_body = _bulk_body(JobOperation.RETRY)


@dataclass
class BulkCancelOperation(Operation):
    """Documents the body that `cancel_many` decodes by hand."""

    def __post_init__(self) -> None:
        self.request_body = _bulk_body(JobOperation.CANCEL)


@dataclass
class CreateJobOperation(Operation):
    """Documents the body that `create_job` decodes by hand."""

    def __post_init__(self) -> None:
        self.request_body = RequestBody(
            required=True,
            description=f"The job to run, e.g. {_EXAMPLE_BODY}",
            content={"application/json": OpenAPIMediaType(schema=reference("CreateJobRequest"))},
        )


@dataclass
class BatchOperation(Operation):
    """Documents the body that `create_batch` decodes by hand."""

    def __post_init__(self) -> None:
        self.request_body = RequestBody(
            required=True,
            description=f"The jobs to run, e.g. {_EXAMPLE_BATCH}",
            content={"application/json": OpenAPIMediaType(schema=reference("BatchRequest"))},
        )


@dataclass
class RescheduleOperation(Operation):
    """Documents the body that `reschedule_job` decodes by hand."""

    def __post_init__(self) -> None:
        self.request_body = RequestBody(
            required=True,
            description=f"When the job is due, e.g. {_EXAMPLE_RESCHEDULE}",
            content={"application/json": OpenAPIMediaType(schema=reference("RescheduleRequest"))},
        )


@dataclass
class LimitsOperation(Operation):
    """Documents the body that `set_limits` decodes by hand."""

    def __post_init__(self) -> None:
        self.request_body = RequestBody(
            required=True,
            description=f"The queue's limits, e.g. {_EXAMPLE_LIMITS}; {{}} lifts them all",
            content={"application/json": OpenAPIMediaType(schema=reference("QueueLimitsRequest"))},
        )


def parse_limits(body: bytes) -> QueueLimits:
    """The body as a queue's limits, or a 400 saying exactly what is wrong with it."""
    try:
        return _decoded(body, QueueLimitsRequest, _EXAMPLE_LIMITS).limits()
    except ValueError as error:
        raise ClientException(detail=f"invalid limits: {error}") from None


def parse_reschedule(body: bytes) -> RescheduleRequest:
    """The body as a `RescheduleRequest`, or a 400 saying exactly what is wrong with it."""
    return _decoded(body, RescheduleRequest, _EXAMPLE_RESCHEDULE)


def parse_create_request(body: bytes) -> CreateJobRequest:
    """The body as a `CreateJobRequest`, or a 400 saying exactly what is wrong with it."""
    return _decoded(body, CreateJobRequest, _EXAMPLE_BODY)


Body = TypeVar("Body", bound=msgspec.Struct)


def _decoded(body: bytes, kind: type[Body], example: str) -> Body:
    if not body.strip():
        raise ClientException(detail=f"request body is empty; send a JSON object such as {example}")
    try:
        return msgspec.json.decode(body, type=kind)
    except msgspec.ValidationError as error:
        raise ClientException(detail=f"invalid request body: {error}") from None
    except msgspec.DecodeError as error:
        raise ClientException(detail=f"request body is not valid JSON: {error}") from None
    except UnicodeDecodeError as error:
        # msgspec validates UTF-8 only as it decodes a string: raised, not a DecodeError.
        raise ClientException(
            detail="request body is not valid UTF-8: a string holds the byte "
            f"0x{error.object[error.start]:02x}"
        ) from None
    except RecursionError:
        raise ClientException(detail="request body is nested too deeply") from None


def parse_batch(body: bytes) -> BatchRequest:
    """The body as a `BatchRequest`, or a 400 saying exactly what is wrong with it."""
    return _decoded(body, BatchRequest, _EXAMPLE_BATCH)


def parse_selection(body: bytes, operation: JobOperation) -> Selection:
    """The jobs a bulk `operation` takes, or a 400 saying what is wrong with the body."""
    try:
        return _decoded(body, BulkRequest, _EXAMPLE_BULK[operation]).selection(operation)
    except ValueError as error:
        raise ClientException(detail=str(error)) from None
