"""Workflows in the in-memory store: a workflow's jobs, the results of a job's
dependencies, and a workflow cancelled or retried whole."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from jobqueue.domain.dependencies import Dependency, WorkflowNotFound
from jobqueue.domain.job import Job
from jobqueue.domain.status import LIVE
from jobqueue.domain.transitions import Operation
from tests.fakes.rows import _listed
from tests.fakes.store_operations import OperatorOperations


class Workflows(OperatorOperations):
    """A workflow's reads and operations: its cancel and retry are its jobs' own."""

    async def dependency_results(self, ids: Sequence[UUID]) -> Sequence[Dependency]:
        await self._enter()
        return self._graphs.results(ids)

    async def workflow(self, workflow_id: UUID) -> Sequence[Job]:
        await self._enter()
        jobs = [job for job in self._jobs.values() if job.workflow_id == workflow_id]
        if not jobs:
            raise WorkflowNotFound(workflow_id)
        return [_listed(job) for job in sorted(jobs, key=lambda job: self._sequence[job.id])]

    async def cancel_workflow(self, workflow_id: UUID) -> int:
        live = [job for job in await self.workflow(workflow_id) if job.status in LIVE]
        # Each read again: a cancel before it may have cancelled it as a dependent.
        cancelled = [
            self._cancel(self._jobs[job.id])
            for job in sorted(live, key=lambda j: j.id)
            if self._jobs[job.id].status in LIVE
        ]
        return len(cancelled)

    async def retry_workflow(self, workflow_id: UUID) -> int:
        jobs = [self._jobs[job.id] for job in await self.workflow(workflow_id)]
        return self._graphs.retried(
            jobs,
            lambda job, target, waiting: self._retry(
                job, Operation.RETRY_WORKFLOW, target, waiting
            ),
        )
