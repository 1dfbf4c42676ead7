"""A Python client of the jobqueue HTTP API, sync (`Client`) and async (`AsyncClient`).

    import os
    from jobqueue.client import Client

    with Client("http://127.0.0.1:8080", token=os.environ.get("JOBQUEUE_TOKEN")) as jobs:
        job = jobs.submit("sleep", {"duration": "2s"}, queue="reports")
        print(jobs.status(job.id).status)

Every route of the API is a method; answers are the service's own records (msgspec
Structs: `JobRecord`, `JobStatusView`, …), failures one exception per status
(`BadRequest`, `NotFound`, `Conflict`, …, all `ApiError`). A submission carries an
Idempotency-Key (a new one per call unless given; none for jobs that depend on each
other, which take none), so the client can send it again after a broken connection;
502/503/504 (with their `Retry-After`) and failed connections are tried again with
jittered exponential backoff (`Retries`), for every call that is safe to repeat.
"""

from __future__ import annotations

from jobqueue.client.async_sessions import AsyncClient
from jobqueue.client.calls import Batch
from jobqueue.client.errors import (
    ApiError,
    BadRequest,
    ClientError,
    Conflict,
    InvalidClientOption,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    RequestTimeout,
    ServerError,
    ServiceUnreachable,
    Unauthorized,
    Unavailable,
    UnexpectedAnswer,
)
from jobqueue.client.sending import Retries
from jobqueue.client.sessions import Client
from jobqueue.domain.errors import NotEnded
from jobqueue.wire.queue_records import QueueRecord, QueueStateView
from jobqueue.wire.records import (
    AttemptView,
    BatchItem,
    JobList,
    JobRecord,
    JobStatusView,
    JobTypeView,
    PeriodicView,
    SubmittedRecord,
    UniqueView,
    WorkerView,
    WorkflowRecord,
)
from jobqueue.wire.requests import BatchJob, SubmitOptions, job_request

__all__ = [
    "ApiError",
    "AsyncClient",
    "AttemptView",
    "BadRequest",
    "Batch",
    "BatchItem",
    "BatchJob",
    "Client",
    "ClientError",
    "Conflict",
    "InvalidClientOption",
    "JobList",
    "JobRecord",
    "JobStatusView",
    "JobTypeView",
    "MethodNotAllowed",
    "NotEnded",
    "NotFound",
    "PayloadTooLarge",
    "PeriodicView",
    "QueueRecord",
    "QueueStateView",
    "RequestTimeout",
    "Retries",
    "ServerError",
    "ServiceUnreachable",
    "SubmitOptions",
    "SubmittedRecord",
    "Unauthorized",
    "Unavailable",
    "UnexpectedAnswer",
    "UniqueView",
    "WorkerView",
    "WorkflowRecord",
    "job_request",
]
