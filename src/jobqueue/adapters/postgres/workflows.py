"""A workflow's jobs, its cancel and its retry, and what a dependent's handler reads of its
dependencies (`domain/dependencies.py`): `PostgresJobStore` hands these here."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.driver import fetch_pooled
from jobqueue.adapters.postgres.failures import store_failures
from jobqueue.adapters.postgres.queries.dependencies import DEPENDENCY_RESULTS
from jobqueue.adapters.postgres.queries.workflows import (
    CANCEL_WORKFLOW,
    RETRY_WORKFLOW,
    WORKFLOW_EXISTS,
    WORKFLOW_JOBS,
)
from jobqueue.adapters.postgres.rows import job_from_row
from jobqueue.adapters.postgres.statement import Statement
from jobqueue.domain.dependencies import MAX_WORKFLOW_JOBS, Dependency, WorkflowNotFound
from jobqueue.domain.job import Job
from jobqueue.domain.status import Status


class PostgresWorkflows:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def dependency_results(self, ids: Sequence[UUID]) -> Sequence[Dependency]:
        if not ids:
            return []
        with store_failures():
            rows = await fetch_pooled(self._engine, DEPENDENCY_RESULTS, {"ids": list(ids)})
        found = {
            row["id"]: Dependency(
                row["id"], row["type"], Status(row["status"]), row["result"], row["last_error"]
            )
            for row in rows
        }
        return [found[each] for each in ids if each in found]

    async def workflow(self, workflow_id: UUID) -> Sequence[Job]:
        values = {"workflow_id": workflow_id, "limit": MAX_WORKFLOW_JOBS}
        with store_failures():
            rows = await fetch_pooled(self._engine, WORKFLOW_JOBS, values)
        if not rows:
            raise WorkflowNotFound(workflow_id)
        return [job_from_row(row) for row in rows]

    async def cancel_workflow(self, workflow_id: UUID) -> int:
        return await self._acted(CANCEL_WORKFLOW, workflow_id)

    async def retry_workflow(self, workflow_id: UUID) -> int:
        return await self._acted(RETRY_WORKFLOW, workflow_id)

    async def _acted(self, statement: Statement, workflow_id: UUID) -> int:
        values = {"workflow_id": workflow_id, "limit": MAX_WORKFLOW_JOBS}
        with store_failures():
            acted = len(await fetch_pooled(self._engine, statement, values))
            if not acted and not await fetch_pooled(self._engine, WORKFLOW_EXISTS, values):
                raise WorkflowNotFound(workflow_id)
        return acted
