"""The in-memory store's dependencies (`domain/dependencies.py`): who waits for whom, and
the release migrations 0024 and 0025's triggers write in PostgreSQL, done as they do it:
when a job that has dependents ends (or is deleted while live), its edges are counted off
its waiting dependents, in id order; the last one makes a dependent pending, one that did
not complete cancels it unless it runs anyway, and those cancels release in turn. A job
retried on its own is counted back on by the dependents still waiting that had counted
its ending (a workflow's retry counts its own steps as RETRY_WORKFLOW does)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import replace
from datetime import datetime
from uuid import UUID

from jobqueue.domain.dependencies import (
    Dependency,
    Placed,
    Step,
    check_keyless,
    link,
    place,
    waits_of,
)
from jobqueue.domain.job import Job
from jobqueue.domain.status import LIVE, Status
from jobqueue.domain.transitions import Operation

DELETED = "deleted"


class FakeGraphs:
    def __init__(self, jobs: Callable[[], MutableMapping[UUID, Job]]) -> None:
        # Read at each use: the store replaces its table when a call is rolled back.
        self._table = jobs
        self._edges: dict[UUID, set[UUID]] = {}
        # The edges an ending counted, by dependency: a retry of it counts them back on.
        self._counted: dict[UUID, set[UUID]] = {}
        self._has_dependents: set[UUID] = set()

    @property
    def _jobs(self) -> MutableMapping[UUID, Job]:
        return self._table()

    def snapshot(self) -> tuple[dict[UUID, set[UUID]], dict[UUID, set[UUID]], set[UUID]]:
        return (_copied(self._edges), _copied(self._counted), set(self._has_dependents))

    def restore(
        self, saved: tuple[dict[UUID, set[UUID]], dict[UUID, set[UUID]], set[UUID]]
    ) -> None:
        self._edges, self._counted, self._has_dependents = saved

    def placed(self, steps: Sequence[Step], ids: Sequence[UUID]) -> tuple[list[Placed], UUID]:
        """`steps` placed (refused as PostgreSQL refuses them), their stored dependencies
        marked, the edges kept; and the graph's workflow."""
        for step in steps:
            check_keyless(step.new)
        linked = link(steps, ids)
        stored = [self._jobs[each] for each in linked.stored if each in self._jobs]
        statuses = {job.id: job.status for job in stored}
        placed = place(linked, statuses)
        joined = (job.workflow_id for job in stored if job.workflow_id is not None)
        workflow_id = next(joined, uuid.uuid4())
        for job in stored:
            self._has_dependents.add(job.id)
            if job.workflow_id is None:
                self._jobs[job.id] = replace(job, workflow_id=workflow_id)
        self._has_dependents |= {each.id for each in placed if each.has_dependents}
        # Per job: sharing a count is PostgreSQL's economy, not a difference anyone sees.
        for wait in waits_of(placed):
            for dependency in wait.dependencies:
                self._edges.setdefault(dependency, set()).update(wait.jobs)
        return placed, workflow_id

    def ended(
        self, before: Job, status: Status | str, now: datetime, operation: Operation | None = None
    ) -> None:
        """`before` (as it was) moved to `status` by `operation`, or was deleted
        (`DELETED`). A workflow's retry writes its own counts (`retried`): the jobs it
        revives are not counted back on here."""
        if before.id not in self._has_dependents:
            return
        if before.status in LIVE and status not in LIVE:
            self._release([(before.id, str(status))], now)
        elif (
            status in LIVE
            and before.status not in LIVE
            and operation is not Operation.RETRY_WORKFLOW
        ):
            for dependent in sorted(self._counted.pop(before.id, set())):
                job = self._jobs.get(dependent)
                if job is not None and job.status is Status.WAITING:
                    self._edges.setdefault(before.id, set()).add(dependent)
                    self._jobs[dependent] = replace(job, waiting_for=job.waiting_for + 1)
        if status == DELETED:
            self._counted.pop(before.id, None)

    def _release(self, ended: list[tuple[UUID, str]], now: datetime) -> None:
        while ended:
            met: dict[UUID, list[tuple[UUID, str]]] = {}
            for dependency, status in ended:
                for dependent in self._edges.pop(dependency, set()):
                    met.setdefault(dependent, []).append((dependency, status))
                    self._counted.setdefault(dependency, set()).add(dependent)
            ended = []
            for job_id in sorted(met):
                job = self._jobs.get(job_id)
                if job is None or job.status is not Status.WAITING:
                    continue
                failed = min(
                    (f"{d} {s}" for d, s in met[job_id] if s != Status.COMPLETED), default=None
                )
                left = max(job.waiting_for - len(met[job_id]), 0)
                if failed is not None and not job.run_anyway:
                    failed_id, failed_status = failed.split(" ")
                    error = f"job {failed_id} it depends on ended {failed_status}"
                    moved = replace(
                        job, status=Status.CANCELLED, waiting_for=left, last_error=error
                    )
                    if job_id in self._has_dependents:
                        ended.append((job_id, Status.CANCELLED.value))
                elif left == 0:
                    moved = replace(
                        job, status=Status.PENDING, waiting_for=0, run_at=max(job.run_at, now)
                    )
                else:
                    moved = replace(job, waiting_for=left)
                self._jobs[job_id] = replace(moved, updated_at=now)

    def results(self, ids: Sequence[UUID]) -> list[Dependency]:
        return [
            Dependency(job.id, job.type, job.status, job.result, job.last_error)
            for job in (self._jobs[each] for each in ids if each in self._jobs)
        ]

    def retried(self, workflow: Sequence[Job], retry: Callable[[Job, Status, int], Job]) -> int:
        """A workflow's jobs that ended without completing, retried as RETRY_WORKFLOW
        retries them: `retry(job, status, waiting_for)` writes each (as
        `Operation.RETRY_WORKFLOW`), with the counts written here."""
        chosen = [
            job
            for job in workflow
            if job.status in (Status.FAILED, Status.DEAD_LETTER, Status.CANCELLED)
        ]
        again = {job.id for job in chosen}
        # A job still waiting waits again for the retried steps it depends on.
        for job in workflow:
            if job.status is Status.WAITING:
                retried = [each for each in job.depends_on or () if each in again]
                for dependency in retried:
                    self._edges.setdefault(dependency, set()).add(job.id)
                now = self._jobs[job.id]
                self._jobs[job.id] = replace(now, waiting_for=now.waiting_for + len(retried))
        for job in chosen:
            awaited = [
                each
                for each in job.depends_on or ()
                if each in again or (each in self._jobs and self._jobs[each].status in LIVE)
            ]
            for dependency in awaited:
                self._edges.setdefault(dependency, set()).add(job.id)
            status = Status.WAITING if awaited else Status.PENDING
            retry(job, status, len(awaited))
        return len(chosen)


def _copied(edges: dict[UUID, set[UUID]]) -> dict[UUID, set[UUID]]:
    return {key: set(value) for key, value in edges.items()}
