"""The `/workflows` resource: a graph of jobs submitted together (`domain/dependencies.py`),
its jobs' statuses, its cancel, and the retry of its steps that did not complete."""

from __future__ import annotations

from collections import Counter
from typing import Annotated
from uuid import UUID

from litestar import Controller, get, post
from litestar.di import NamedDependency
from litestar.params import PathParameter
from litestar.status_codes import HTTP_200_OK

from jobqueue.domain.status import LIVE, Status
from jobqueue.entrypoints.http.parameters import STORE_DOWN, error_spec, parse_uuid
from jobqueue.entrypoints.http.service import JobService
from jobqueue.wire.records import JobRecord, WorkflowActed, WorkflowRecord

WorkflowId = Annotated[
    str,
    PathParameter(description="The workflow's id, a UUID.", schema_extra={"format": "uuid"}),
]
_INVALID_ID = error_spec("The workflow id is not a UUID")
_UNKNOWN = error_spec("No job of this workflow is stored")


def parse_workflow_id(raw: str) -> UUID:
    return parse_uuid(raw, "workflow id")


class WorkflowsController(Controller):
    path = "/workflows"
    tags = ("workflows",)

    @get(
        "/{workflow_id:str}",
        summary="Read a workflow: every job's status, in submission order",
        response_description="The workflow's jobs (results left out), and counts by status",
        description="A workflow is a batch whose jobs depend on each other (or have a "
        "callback), with the jobs added to it later by depending on its jobs. Read a job "
        "for its result.",
        responses={400: _INVALID_ID, 404: _UNKNOWN, 503: STORE_DOWN},
    )
    async def get_workflow(
        self, workflow_id: WorkflowId, jobs: NamedDependency[JobService]
    ) -> WorkflowRecord:
        workflow = parse_workflow_id(workflow_id)
        found = await jobs.workflow(workflow)
        counts = Counter(job.status for job in found)
        return WorkflowRecord(
            id=workflow,
            counts={status: counts[status] for status in Status if counts[status]},
            jobs=[JobRecord.of(job) for job in found],
            ended=not any(job.status in LIVE for job in found),
        )

    @post(
        "/{workflow_id:str}/cancel",
        status_code=HTTP_200_OK,
        summary="Cancel every job of a workflow that has not ended",
        response_description="How many jobs were cancelled",
        description="Waiting and pending jobs never run; running ones lose their lease and "
        "their processes stop them, as POST /jobs/{id}/cancel does.",
        responses={400: _INVALID_ID, 404: _UNKNOWN, 503: STORE_DOWN},
    )
    async def cancel_workflow(
        self, workflow_id: WorkflowId, jobs: NamedDependency[JobService]
    ) -> WorkflowActed:
        workflow = parse_workflow_id(workflow_id)
        return WorkflowActed(workflow, await jobs.cancel_workflow(workflow))

    @post(
        "/{workflow_id:str}/retry",
        status_code=HTTP_200_OK,
        summary="Retry a workflow's failed, dead-lettered and cancelled jobs",
        response_description="How many jobs were retried",
        description="Each gets a fresh attempt budget and waits again for those of its "
        "dependencies that are retried with it (or still live), so the workflow runs on "
        "from where it stopped; jobs that completed are not run again.",
        responses={400: _INVALID_ID, 404: _UNKNOWN, 503: STORE_DOWN},
    )
    async def retry_workflow(
        self, workflow_id: WorkflowId, jobs: NamedDependency[JobService]
    ) -> WorkflowActed:
        workflow = parse_workflow_id(workflow_id)
        return WorkflowActed(workflow, await jobs.retry_workflow(workflow))
