"""The job store on PostgreSQL: each operation of the state machine is one statement of
`queries/`, sent on a pooled connection in autocommit (`driver.fetch_pooled`).

Every write is a compare-and-swap, applied atomically or to no row; a row is read back
only on an error path, to say which error it is.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from os import getpid
from socket import gethostname
from typing import Any
from uuid import UUID

import asyncpg
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.claiming import QueueClaims
from jobqueue.adapters.postgres.driver import fetch_pooled
from jobqueue.adapters.postgres.enqueue import enqueue_graph, enqueue_many, submit_pooled
from jobqueue.adapters.postgres.failures import store_failures
from jobqueue.adapters.postgres.listing import key_statement, page_from_rows, page_statement
from jobqueue.adapters.postgres.periodic import PostgresPeriodicSlots
from jobqueue.adapters.postgres.queries import jobs as q
from jobqueue.adapters.postgres.queries.keys import PRUNE_KEY_STARTS
from jobqueue.adapters.postgres.queries.listing import count_selected, prune
from jobqueue.adapters.postgres.queues import PostgresQueues
from jobqueue.adapters.postgres.rows import job_from_row, progress_text
from jobqueue.adapters.postgres.statement import Statement
from jobqueue.adapters.postgres.workflows import PostgresWorkflows
from jobqueue.domain.bulk import (
    ACTIONABLE,
    CANCELLABLE,
    COUNT_BUDGET,
    RESCHEDULABLE,
    Selection,
    SelectionCount,
)
from jobqueue.domain.dependencies import Dependency, Step
from jobqueue.domain.errors import (
    InvalidTransition,
    JobNotFound,
    StoreError,
    UniqueKeyHeld,
)
from jobqueue.domain.fields import DEFAULT_QUEUE
from jobqueue.domain.flow import Claimed, QueueLimits
from jobqueue.domain.job import Job, Lease, NewJob
from jobqueue.domain.listing import JobPage, JobQuery, KeyLookup
from jobqueue.domain.outcome import Decision
from jobqueue.domain.periodic import LastSlot
from jobqueue.domain.ports import Submitted
from jobqueue.domain.progress import Progress
from jobqueue.domain.queues import QueueState, QueueSummary
from jobqueue.domain.retention import check_prune_request
from jobqueue.domain.status import Status
from jobqueue.domain.transitions import DELETABLE, DELETE, Operation

__all__ = ["PostgresJobStore"]

# A job can leave dead_letter between a refused retry (or leave processing between a
# refused cancel) and the read that explains the refusal, and come back to it; a few
# rounds settle any realistic race.
_REFUSAL_ROUNDS = 3
# A retried unique job found its key held (`uq_jobs_unique_key`).
_UNIQUE_VIOLATION = "23505"


class PostgresJobStore:
    """`JobStore` on PostgreSQL through a SQLAlchemy async engine (asyncpg)."""

    def __init__(self, engine: AsyncEngine, *, worker: str | None = None) -> None:
        self._engine = engine
        # Who claims, as the attempt log shows it: this process, unless told otherwise.
        self._worker = worker if worker is not None else f"{gethostname()}:{getpid()}"
        self._claims = QueueClaims(self._fetch, self._worker)
        self._queues = PostgresQueues(engine)
        self._periodic = PostgresPeriodicSlots(engine)
        self._workflows = PostgresWorkflows(engine)

    @property
    def worker(self) -> str:
        """This process as the attempt log names it (and its published job types)."""
        return self._worker

    async def submit(self, new: NewJob) -> Submitted:
        # Announced by the caller (the API's coalescing notifier), not per statement.
        if new.depends_on:
            (submitted,) = await self.submit_graph((Step(new),))
            return submitted
        return await submit_pooled(self._engine, new)

    async def submit_many(self, news: Sequence[NewJob]) -> Sequence[Submitted]:
        # One transaction of its own; announced by the caller, as `submit` is.
        return await enqueue_many(self._engine, news, announce=False)

    async def submit_graph(self, steps: Sequence[Step]) -> Sequence[Submitted]:
        return await enqueue_graph(self._engine, steps, announce=False)

    async def dependency_results(self, ids: Sequence[UUID]) -> Sequence[Dependency]:
        return await self._workflows.dependency_results(ids)

    async def workflow(self, workflow_id: UUID) -> Sequence[Job]:
        return await self._workflows.workflow(workflow_id)

    async def cancel_workflow(self, workflow_id: UUID) -> int:
        return await self._workflows.cancel_workflow(workflow_id)

    async def retry_workflow(self, workflow_id: UUID) -> int:
        return await self._workflows.retry_workflow(workflow_id)

    async def get(self, job_id: UUID) -> Job:
        rows = await self._fetch(q.GET_JOB, {"id": job_id})
        if not rows:
            raise JobNotFound(job_id)
        return job_from_row(rows[0])

    # --- claims and endings -----------------------------------------------------------

    async def claim(
        self,
        limit: int,
        lease: timedelta,
        queue: str = DEFAULT_QUEUE,
        *,
        types: Collection[str],
    ) -> Claimed:
        _check_claim(limit, lease)
        return await self._claims.claim(queue, limit, lease, types)

    async def record_many(self, endings: Sequence[tuple[Lease, Decision]]) -> set[Lease]:
        if not endings:
            return set()
        return await self._leases(q.RECORD_ENDINGS, ending_values(endings))

    async def record_and_claim(
        self,
        endings: Sequence[tuple[Lease, Decision]],
        limit: int,
        lease: timedelta,
        queue: str = DEFAULT_QUEUE,
        *,
        types: Collection[str],
    ) -> tuple[set[Lease], Claimed]:
        _check_claim(limit, lease)
        if not endings:
            return set(), await self.claim(limit, lease, queue, types=types)
        return await self._claims.record_and_claim(
            ending_values(endings), queue, limit, lease, types
        )

    async def renew(self, leases: Sequence[Lease], lease: timedelta) -> set[Lease]:
        if lease <= timedelta(0):
            raise ValueError(f"lease must be positive, got {lease}")
        if not leases:
            return set()
        return await self._leases(q.RENEW_LEASES, {**_lease_values(leases), "lease": lease})

    async def record_progress(self, reports: Sequence[tuple[Lease, Progress]]) -> set[Lease]:
        if not reports:
            return set()
        values = {
            **_lease_values([lease for lease, _ in reports]),
            "progress": [progress_text(progress) for _, progress in reports],
        }
        return await self._leases(q.RECORD_PROGRESS, values)

    async def watch(self, job_id: UUID) -> None:
        await self._fetch(q.WATCH_JOB, {"id": job_id})

    async def recover_expired(self, limit: int) -> Sequence[Job]:
        if limit < 1:
            raise ValueError(f"recovery limit must be at least 1, got {limit}")
        rows = await self._fetch(q.RECOVER_EXPIRED, {"limit": limit})
        return [job_from_row(row) for row in rows]

    # --- an operator's actions ----------------------------------------------------------

    async def retry(self, job_id: UUID) -> Job:
        with _unique_key_held(job_id):
            return await self._transition(q.RETRY_JOB, job_id, Operation.RETRY, ACTIONABLE)

    async def cancel(self, job_id: UUID) -> Job:
        return await self._transition(q.CANCEL_JOB, job_id, Operation.CANCEL, CANCELLABLE)

    async def reschedule(
        self, job_id: UUID, *, run_at: datetime | None = None, delay: timedelta = timedelta(0)
    ) -> Job:
        values = {"run_at": run_at, "delay": delay}
        return await self._transition(
            q.RESCHEDULE_JOB, job_id, Operation.RESCHEDULE, RESCHEDULABLE, values
        )

    async def delete(self, job_id: UUID) -> Job:
        return await self._transition(q.DELETE_JOB, job_id, DELETE, DELETABLE)

    async def cancel_many(self, selection: Selection) -> int:
        selection.require(Operation.CANCEL)
        return await self._count(q.cancel_selected, selection)

    async def retry_many(self, selection: Selection) -> int:
        selection.require(Operation.RETRY)
        # All or nothing: one selected job's unique key held by a live job refuses all.
        with _unique_key_held(None):
            return await self._count(q.retry_selected, selection)

    async def discard_many(self, selection: Selection) -> int:
        selection.require(Operation.RETRY)
        return await self._count(q.discard_selected, selection)

    async def count_selected(self, selection: Selection) -> SelectionCount:
        statement = count_selected(
            selection.status,
            by_queue=selection.queue is not None,
            by_type=selection.type is not None,
        )
        values = {"budget": COUNT_BUDGET, "queue": selection.queue, "type": selection.type}
        (row,) = await self._fetch(statement, values)
        return SelectionCount(int(row["selected"]), complete=row["read"] < COUNT_BUDGET)

    async def _count(self, statement_for: Any, selection: Selection) -> int:
        """How many rows the statement `statement_for` makes for `selection`'s shape acted on."""
        statement: Statement = statement_for(
            selection.status,
            by_queue=selection.queue is not None,
            by_type=selection.type is not None,
        )
        values = {"limit": selection.limit, "queue": selection.queue, "type": selection.type}
        return len(await self._fetch(statement, values))

    async def _transition(
        self,
        statement: Statement,
        job_id: UUID,
        operation: str,
        allowed: frozenset[Status],
        values: Mapping[str, Any] | None = None,
    ) -> Job:
        """Run `statement`, an operator's action on one job returning the job, with `values`
        besides its id; when it matched no row, raise the error its current status
        explains."""
        status: str | None = None
        for _ in range(_REFUSAL_ROUNDS):
            rows = await self._fetch(statement, {"id": job_id, **(values or {})})
            if rows:
                return job_from_row(rows[0])
            found = await self._fetch(q.STATUS_OF, {"id": job_id})
            if not found:
                raise JobNotFound(job_id)
            status = found[0]["status"]
            if status not in allowed:
                break
        raise InvalidTransition(job_id, operation, str(status))

    # --- many jobs: retention and listing ---------------------------------------------------

    async def prune_finished(self, older_than: Mapping[Status, timedelta], limit: int) -> int:
        check_prune_request(older_than, limit)
        if not older_than:
            return 0
        statuses = tuple(sorted(older_than))
        values: dict[str, object] = {"limit": limit}
        values |= {f"age_{status}": older_than[status] for status in statuses}
        return len(await self._fetch(prune(statuses), values))

    async def prune_key_starts(self, limit: int) -> int:
        return len(await self._fetch(PRUNE_KEY_STARTS, {"limit": limit}))

    async def list_jobs(self, query: JobQuery) -> JobPage:
        statement, values = page_statement(query)
        return page_from_rows(query, await self._fetch(statement, values))

    async def find_by_key(self, lookup: KeyLookup) -> Job | None:
        rows = await self._fetch(key_statement(lookup), {"key": lookup.key})
        return job_from_row(rows[0]) if rows else None

    # --- queues ---------------------------------------------------------------------------

    async def pause_queue(self, queue: str) -> QueueState:
        return await self._queues.set_paused(queue, True)

    async def resume_queue(self, queue: str) -> QueueState:
        return await self._queues.set_paused(queue, False)

    async def paused_queues(self, queues: Sequence[str]) -> set[str]:
        return await self._queues.paused(queues)

    async def set_queue_limits(self, queue: str, limits: QueueLimits) -> QueueState:
        return await self._queues.set_limits(queue, limits)

    async def declare_queue_limits(self, queue: str, limits: QueueLimits) -> QueueState | None:
        return await self._queues.declare_limits(queue, limits)

    async def queue_summaries(self, max_age: timedelta | None = None) -> Sequence[QueueSummary]:
        return await self._queues.summaries(max_age)

    async def queue_summary(self, queue: str, max_age: timedelta | None = None) -> QueueSummary:
        return await self._queues.summary(queue, max_age)

    # --- periodic jobs ----------------------------------------------------------------------

    async def insert_slot(
        self, name: str, slot: datetime, new: NewJob, *, missed: bool = False
    ) -> Job | None:
        return await self._periodic.insert_slot(name, slot, new, missed=missed)

    async def last_slots(self) -> Mapping[str, LastSlot]:
        return await self._periodic.last_slots()

    async def ping(self) -> None:
        await self._fetch(_PING, {})

    # --- sending ----------------------------------------------------------------------------

    async def _leases(self, statement: Statement, values: Mapping[str, Any]) -> set[Lease]:
        rows = await self._fetch(statement, values)
        return {Lease(job_id, token) for job_id, token in rows}

    async def _fetch(
        self, statement: Statement, values: Mapping[str, Any]
    ) -> Sequence[asyncpg.Record]:
        """`statement` on its own, in autocommit, on the driver (`driver.fetch_pooled`),
        its failures made domain errors. Values the statement has no parameter for are
        left out: a statement's shape decides which filters it takes."""
        wanted = {name: values[name] for name in statement.parameters if name in values}
        with store_failures():
            return await fetch_pooled(self._engine, statement, wanted)


_PING = Statement("ping", "SELECT 1")


def _check_claim(limit: int, lease: timedelta) -> None:
    if limit < 1:
        raise ValueError(f"claim limit must be at least 1, got {limit}")
    if lease <= timedelta(0):
        raise ValueError(f"lease must be positive, got {lease}")


def _lease_values(leases: Sequence[Lease]) -> dict[str, list[Any]]:
    return {
        "ids": [lease.job_id for lease in leases],
        "tokens": [lease.token for lease in leases],
    }


def ending_values(endings: Sequence[tuple[Lease, Decision]]) -> dict[str, list[Any]]:
    """The parallel arrays of `RECORD_ENDINGS`, one element per ending."""
    decisions = [decision for _, decision in endings]
    return {
        **_lease_values([lease for lease, _ in endings]),
        "statuses": [decision.status.value for decision in decisions],
        "errors": [decision.error for decision in decisions],
        "delays": [decision.delay for decision in decisions],
        "refunds": [1 if decision.gives_back_attempt else 0 for decision in decisions],
        "snoozed": [1 if decision.snoozed else 0 for decision in decisions],
        "results": [decision.result for decision in decisions],
        "progress": [
            None if decision.progress is None else progress_text(decision.progress)
            for decision in decisions
        ],
    }


@contextmanager
def _unique_key_held(job_id: UUID | None) -> Iterator[None]:
    """An operator's retry that met `uq_jobs_unique_key` raises `UniqueKeyHeld`: the job
    (`job_id`, or one of those selected) has a unique key a live job holds now."""
    try:
        yield
    except StoreError as error:
        if error.sqlstate != _UNIQUE_VIOLATION:
            raise
        raise UniqueKeyHeld(job_id) from error
