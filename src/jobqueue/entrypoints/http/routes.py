"""The `/jobs` resource: submit, read, list, retry and cancel jobs, one or many; reschedule,
run now and delete one."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, delete, get, post
from litestar.datastructures import ResponseHeader
from litestar.di import NamedDependency
from litestar.openapi.datastructures import ResponseSpec
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED

from jobqueue.domain.bulk import MAX_SELECTED
from jobqueue.domain.transitions import Operation as JobOperation
from jobqueue.entrypoints.http.bodies import (
    BatchOperation,
    BulkCancelOperation,
    BulkOperation,
    CreateJobOperation,
    RescheduleOperation,
    parse_batch,
    parse_create_request,
    parse_reschedule,
    parse_selection,
)
from jobqueue.entrypoints.http.listing import encode_cursor, parse_list_query
from jobqueue.entrypoints.http.parameters import (
    INVALID_ID,
    STORE_DOWN,
    UNKNOWN_JOB,
    IdempotencyKey,
    JobId,
    ListCursor,
    ListLimit,
    ListQueue,
    ListStatus,
    ListType,
    WaitTimeout,
    error_spec,
    parse_job_id,
    parse_wait,
)
from jobqueue.entrypoints.http.service import JobService
from jobqueue.wire.records import (
    BatchItem,
    BatchResult,
    Cancelled,
    Discarded,
    JobList,
    JobRecord,
    JobStatusView,
    Retried,
    SubmittedRecord,
)
from jobqueue.wire.requests import MAX_BATCH_JOBS


class JobsController(Controller):
    path = "/jobs"
    tags = ("jobs",)

    @post(
        "/",
        status_code=HTTP_201_CREATED,
        summary="Submit a job",
        response_description="The new job",
        description="201 with the new job; 200 with the original job when an "
        "Idempotency-Key replays an identical earlier request (`replayed: true`), or with "
        "the job holding the submission's unique key (`duplicate: true`).",
        operation_class=CreateJobOperation,
        response_headers=[
            ResponseHeader(
                name="Location",
                documentation_only=True,
                description="The job's own URL: /jobs/{id}.",
            )
        ],
        responses={
            200: ResponseSpec(
                SubmittedRecord,
                description="Idempotent replay (the job the first request with this key "
                "created), or a unique duplicate (the job holding the key)",
                generate_examples=False,
            ),
            400: error_spec(
                "The body is not a valid job: malformed JSON, a missing, unknown "
                "or mistyped field, an unknown type, a payload the handler refuses"
            ),
            409: error_spec("The Idempotency-Key was already used with a different request"),
            413: error_spec("The body exceeds MAX_BODY_BYTES"),
            503: STORE_DOWN,
        },
    )
    async def create_job(
        self,
        request: Request[Any, Any, Any],
        jobs: NamedDependency[JobService],
        idempotency_key: IdempotencyKey = None,
    ) -> Response[SubmittedRecord]:
        body = parse_create_request(await request.body())
        submitted = await jobs.submit(body, idempotency_key)
        job = submitted.job
        created = not (submitted.replayed or submitted.duplicate)
        return Response(
            SubmittedRecord.of(job, duplicate=submitted.duplicate, replayed=submitted.replayed),
            status_code=HTTP_201_CREATED if created else HTTP_200_OK,
            headers={"Location": f"/jobs/{job.id}"},
        )

    @post(
        "/batch",
        status_code=HTTP_201_CREATED,
        summary="Submit many jobs at once, all or none",
        response_description="Every job, in the order sent",
        description=f"1 to {MAX_BATCH_JOBS} jobs in one transaction: each is checked and "
        "answered as POST /jobs would answer it (`duplicate`, and `replayed` for an "
        "idempotency_key that replays an earlier identical job); one invalid job, or a key "
        "reused with a different job, refuses the whole batch and stores nothing. 201 when "
        "the batch created a job, 200 when every one was a replay or a duplicate. Jobs may "
        "wait for each other (`name`, `depends_on`): the batch is then a workflow, and a "
        "cycle, an unknown name or id, or a stored dependency that will never complete "
        "refuses it (400); a `callback` runs once every job ended.",
        operation_class=BatchOperation,
        responses={
            200: ResponseSpec(
                BatchResult,
                description="Nothing new: every job replayed an earlier one or was a duplicate",
                generate_examples=False,
            ),
            400: error_spec(
                "The body is not a valid batch, or one of its jobs is not a valid job "
                "(the message names it: jobs[i]), or its dependencies make a cycle, name "
                "no job, or a job that will never complete"
            ),
            409: error_spec("A job's idempotency_key was already used with a different job"),
            413: error_spec("The body exceeds MAX_BODY_BYTES"),
            503: STORE_DOWN,
        },
    )
    async def create_batch(
        self, request: Request[Any, Any, Any], jobs: NamedDependency[JobService]
    ) -> Response[BatchResult]:
        body = parse_batch(await request.body())
        submitted = await jobs.submit_batch(body.jobs, body.callback)
        created = any(not (each.replayed or each.duplicate) for each in submitted)
        items = [
            BatchItem.of(each.job, duplicate=each.duplicate, replayed=each.replayed)
            for each in submitted
        ]
        callback = items.pop() if body.callback is not None else None
        return Response(
            BatchResult(jobs=items, callback=callback, workflow_id=items[0].workflow_id),
            status_code=HTTP_201_CREATED if created else HTTP_200_OK,
        )

    @get(
        "/",
        summary="List jobs of one status, a page at a time",
        response_description="A page of jobs, and the cursor of the next page (null on the last)",
        description="Keyset pagination: follow next_cursor until it is null. Pages are read "
        "live, not from a snapshot: a job that changes status meanwhile may be missed or "
        "listed twice.",
        responses={
            400: error_spec(
                "A missing or unknown status, type with status=completed, a limit out of "
                "range, a malformed cursor or one from another status, an unknown or "
                "repeated query parameter"
            ),
            503: STORE_DOWN,
        },
    )
    async def list_jobs(
        self,
        request: Request[Any, Any, Any],
        jobs: NamedDependency[JobService],
        status: ListStatus = None,
        job_type: ListType = None,
        queue: ListQueue = None,
        limit: ListLimit = None,
        cursor: ListCursor = None,
    ) -> JobList:
        # The declared parameters document the query; the parser reads every value of
        # every parameter, to refuse unknown and repeated ones.
        query = parse_list_query(request.query_params.dict())
        page = await jobs.list_jobs(query)
        return JobList(
            jobs=[JobRecord.of(job) for job in page.jobs],
            next_cursor=None if page.next is None else encode_cursor(query.status, page.next),
        )

    @get(
        "/{job_id:str}",
        summary="Read a job's full record",
        response_description="The job",
        responses={400: INVALID_ID, 404: UNKNOWN_JOB, 503: STORE_DOWN},
    )
    async def get_job(self, job_id: JobId, jobs: NamedDependency[JobService]) -> JobRecord:
        return JobRecord.of(await jobs.get(parse_job_id(job_id)))

    @get(
        "/{job_id:str}/status",
        summary="Read a job's status and attempt counters",
        response_description="The job's status",
        responses={400: INVALID_ID, 404: UNKNOWN_JOB, 503: STORE_DOWN},
    )
    async def get_job_status(
        self, job_id: JobId, jobs: NamedDependency[JobService]
    ) -> JobStatusView:
        return JobStatusView.of(await jobs.get(parse_job_id(job_id)))

    @get(
        "/{job_id:str}/wait",
        summary="Wait for a job's end, and read it",
        response_description="The job once it ended (finished, or dead-lettered), or as it "
        "is when the timeout passed first",
        description="A long poll: answers as soon as the job ends (woken by the database's "
        "notification, not by polling), or after `timeout`. Its result is in `result`. "
        "The answer is the same either way: a job whose status is still pending or "
        "processing has not ended yet; ask again to wait longer.",
        responses={
            400: error_spec("A bad job id, or a timeout that is no duration up to 1m"),
            404: UNKNOWN_JOB,
            503: STORE_DOWN,
        },
    )
    async def wait_for_job(
        self, job_id: JobId, jobs: NamedDependency[JobService], within: WaitTimeout = None
    ) -> JobRecord:
        job_uuid = parse_job_id(job_id)
        return JobRecord.of(await jobs.wait(job_uuid, parse_wait(within)))

    @post(
        "/retry",
        status_code=HTTP_200_OK,
        summary="Retry many failed or dead-lettered jobs at once",
        response_description="How many went back to pending",
        description="The oldest jobs of `status` (by when they ended), narrowed by `queue` "
        f"and `type`, at most `limit` (1 to {MAX_SELECTED}, the default) in one statement; "
        "call again while `retried` equals the limit. Each gets a fresh attempt budget and "
        "keeps its history, like a single retry.",
        operation_class=BulkOperation,
        responses={400: error_spec("A bad filter: status, queue, type or limit"), 503: STORE_DOWN},
    )
    async def retry_many(
        self, request: Request[Any, Any, Any], jobs: NamedDependency[JobService]
    ) -> Retried:
        selection = parse_selection(await request.body(), JobOperation.RETRY)
        return Retried(retried=await jobs.retry_many(selection))

    @post(
        "/discard",
        status_code=HTTP_200_OK,
        summary="Delete many failed or dead-lettered jobs at once",
        response_description="How many were deleted",
        description="Selected as by POST /jobs/retry; deleted as retention would delete "
        "them later. A deleted job answers 404.",
        operation_class=BulkOperation,
        responses={400: error_spec("A bad filter: status, queue, type or limit"), 503: STORE_DOWN},
    )
    async def discard_many(
        self, request: Request[Any, Any, Any], jobs: NamedDependency[JobService]
    ) -> Discarded:
        selection = parse_selection(await request.body(), JobOperation.RETRY)
        return Discarded(discarded=await jobs.discard_many(selection))

    @post(
        "/cancel",
        status_code=HTTP_200_OK,
        summary="Cancel many pending or running jobs at once",
        response_description="How many were cancelled",
        description="The first jobs of `status` (pending: in the order claims take them; "
        "processing: soonest lease end first), narrowed by `queue` and `type`, at most "
        f"`limit` (1 to {MAX_SELECTED}, the default) in one statement; call again while "
        "`cancelled` equals the limit. Each is cancelled as by POST /jobs/{id}/cancel.",
        operation_class=BulkCancelOperation,
        responses={400: error_spec("A bad filter: status, queue, type or limit"), 503: STORE_DOWN},
    )
    async def cancel_many(
        self, request: Request[Any, Any, Any], jobs: NamedDependency[JobService]
    ) -> Cancelled:
        selection = parse_selection(await request.body(), JobOperation.CANCEL)
        return Cancelled(cancelled=await jobs.cancel_many(selection))

    @post(
        "/{job_id:str}/retry",
        status_code=HTTP_200_OK,
        summary="Requeue a failed, dead-lettered or cancelled job with a fresh attempt budget",
        response_description="The job, pending again with no attempts used",
        responses={
            400: INVALID_ID,
            404: UNKNOWN_JOB,
            409: error_spec("The job is not failed, dead-lettered or cancelled"),
            503: STORE_DOWN,
        },
    )
    async def retry_job(self, job_id: JobId, jobs: NamedDependency[JobService]) -> JobRecord:
        return JobRecord.of(await jobs.retry(parse_job_id(job_id)))

    @post(
        "/{job_id:str}/cancel",
        status_code=HTTP_200_OK,
        summary="Cancel a pending or running job",
        response_description="The job, cancelled",
        description="A pending job is never run. A running one is cancelled in the same "
        "write: its attempt loses its lease, so nothing its handler does from then on is "
        "recorded, and the process running it stops the handler within about a second "
        "(at its next lease renewal when notifications are off). A cancelled job can be "
        "retried with POST /jobs/{id}/retry.",
        responses={
            400: INVALID_ID,
            404: UNKNOWN_JOB,
            409: error_spec("The job has finished already (or is dead-lettered)"),
            503: STORE_DOWN,
        },
    )
    async def cancel_job(self, job_id: JobId, jobs: NamedDependency[JobService]) -> JobRecord:
        return JobRecord.of(await jobs.cancel(parse_job_id(job_id)))

    @post(
        "/{job_id:str}/run-now",
        status_code=HTTP_200_OK,
        summary="Make a pending job due now",
        response_description="The job, due now",
        description="A scheduled job, or one waiting out a backoff, is due at once (by the "
        "database's clock) and idle workers are woken. Its attempts and options stay.",
        responses={
            400: INVALID_ID,
            404: UNKNOWN_JOB,
            409: error_spec("The job is not pending"),
            503: STORE_DOWN,
        },
    )
    async def run_job_now(self, job_id: JobId, jobs: NamedDependency[JobService]) -> JobRecord:
        return JobRecord.of(await jobs.reschedule(parse_job_id(job_id)))

    @post(
        "/{job_id:str}/reschedule",
        status_code=HTTP_200_OK,
        summary="Move a pending job to another time",
        response_description="The job, due at its new time",
        description="Due at `run_at`, or `delay` from now, by the database's clock. Its "
        "attempts and options stay.",
        operation_class=RescheduleOperation,
        responses={
            400: error_spec("A bad job id, or a body without exactly one of run_at and delay"),
            404: UNKNOWN_JOB,
            409: error_spec("The job is not pending"),
            503: STORE_DOWN,
        },
    )
    async def reschedule_job(
        self, job_id: JobId, request: Request[Any, Any, Any], jobs: NamedDependency[JobService]
    ) -> JobRecord:
        run_at, delay = parse_reschedule(await request.body()).when()
        return JobRecord.of(await jobs.reschedule(parse_job_id(job_id), run_at=run_at, delay=delay))

    @delete(
        "/{job_id:str}",
        status_code=HTTP_200_OK,
        summary="Delete a job that is not running",
        response_description="The job as it was; it answers 404 from now on",
        description="Any job but a running one (cancel it first). Its unique key is free "
        "from then on; a periodic job's slot is not made again.",
        responses={
            400: INVALID_ID,
            404: UNKNOWN_JOB,
            409: error_spec("The job is running"),
            503: STORE_DOWN,
        },
    )
    async def delete_job(self, job_id: JobId, jobs: NamedDependency[JobService]) -> JobRecord:
        return JobRecord.of(await jobs.delete(parse_job_id(job_id)))
