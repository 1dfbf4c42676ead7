"""An operator's operations on the in-memory store's jobs: retry, cancel, reschedule and
delete one job, the bulk ones over a selection, and the pruning of finished jobs."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from uuid import UUID

from jobqueue.domain.attempts import Outcome, holds_final_attempt
from jobqueue.domain.bulk import COUNT_BUDGET, Selection, SelectionCount, index_prefix
from jobqueue.domain.errors import InvalidTransition, UniqueKeyHeld
from jobqueue.domain.job import Job
from jobqueue.domain.listing import position_of
from jobqueue.domain.retention import check_prune_request
from jobqueue.domain.status import Status
from jobqueue.domain.transitions import DELETABLE, DELETE, Operation, sources
from tests.fakes.graphs import DELETED
from tests.fakes.rows import _detached, _logged
from tests.fakes.store_state import StoreState


class OperatorOperations(StoreState):
    """Operations on jobs, each checked against the domain's transition table."""

    async def retry(self, job_id: UUID) -> Job:
        await self._enter()
        job = self._existing(job_id)
        if job.status not in sources(Operation.RETRY):
            raise InvalidTransition(job_id, Operation.RETRY, job.status)
        return self._retry(job)

    def _retry(
        self,
        job: Job,
        operation: Operation = Operation.RETRY,
        target: Status = Status.PENDING,
        waiting_for: int = 0,
    ) -> Job:
        counts_pending = job.unique_states is not None and "pending" in job.unique_states
        if counts_pending and self._unique_holder(job.unique_key, but=job.id) is not None:
            raise UniqueKeyHeld(job.id)
        now = self.clock()
        return self._move(
            job,
            operation,
            target,
            now,
            waiting_for=waiting_for,
            attempt_log=_logged(job, Outcome(job.status.value), job.last_error, job.updated_at)
            if holds_final_attempt(job.status)
            else job.attempt_log,
            attempts=0,
            snoozes=0,
            run_at=now,
        )

    async def cancel(self, job_id: UUID) -> Job:
        await self._enter()
        job = self._existing(job_id)
        if job.status not in sources(Operation.CANCEL):
            raise InvalidTransition(job_id, Operation.CANCEL, job.status)
        return self._cancel(job)

    def _cancel(self, job: Job) -> Job:
        now = self.clock()
        running = job.status is Status.PROCESSING
        cancelled = self._move(
            job,
            Operation.CANCEL,
            Status.CANCELLED,
            now,
            attempt_log=_logged(job, Outcome.CANCELLED, None, now) if running else job.attempt_log,
            locked_until=None,
        )
        if running:
            self.cancels_announced.append(job.id)
        return cancelled

    async def reschedule(
        self, job_id: UUID, *, run_at: datetime | None = None, delay: timedelta = timedelta(0)
    ) -> Job:
        await self._enter()
        job = self._existing(job_id)
        if job.status not in sources(Operation.RESCHEDULE):
            raise InvalidTransition(job_id, Operation.RESCHEDULE, job.status)
        now = self.clock()
        due = now + delay if run_at is None else run_at
        return self._move(job, Operation.RESCHEDULE, Status.PENDING, now, run_at=due)

    async def delete(self, job_id: UUID) -> Job:
        await self._enter()
        job = self._existing(job_id)
        if job.status not in DELETABLE:
            raise InvalidTransition(job_id, DELETE, job.status)
        del self._jobs[job_id]
        self._graphs.ended(job, DELETED, self.clock())
        return _detached(job)

    async def cancel_many(self, selection: Selection) -> int:
        await self._enter()
        selection.require(Operation.CANCEL)
        chosen = self._selected(selection)
        for job in chosen:
            self._cancel(job)
        return len(chosen)

    async def retry_many(self, selection: Selection) -> int:
        await self._enter()
        selection.require(Operation.RETRY)
        chosen = self._selected(selection)
        before = dict(self._jobs)
        try:
            for job in chosen:
                self._retry(job)
        except UniqueKeyHeld:
            # One statement in PostgreSQL: all or nothing.
            self._jobs = before
            raise UniqueKeyHeld(None) from None
        return len(chosen)

    async def discard_many(self, selection: Selection) -> int:
        await self._enter()
        selection.require(Operation.RETRY)
        doomed = self._selected(selection)
        for job in doomed:
            self._delete(job)
        return len(doomed)

    async def count_selected(self, selection: Selection) -> SelectionCount:
        await self._enter()
        # As PostgreSQL reads it: the range the index's leading fields narrow, in its
        # order, the first COUNT_BUDGET jobs of it; the other fields counted among those.
        prefix = index_prefix(selection.status)
        ranged = Selection(
            selection.status,
            queue=selection.queue if "queue" in prefix else None,
            type=selection.type if "type" in prefix else None,
            operation=selection.operation,
        )
        read = self._selected(ranged, COUNT_BUDGET)
        matched = [
            job
            for job in read
            if selection.queue in (None, job.queue) and selection.type in (None, job.type)
        ]
        return SelectionCount(len(matched), complete=len(read) < COUNT_BUDGET)

    def _selected(self, selection: Selection, limit: int | None = None) -> list[Job]:
        matching = sorted(
            (
                job
                for job in self._jobs.values()
                if job.status is selection.status
                and selection.queue in (None, job.queue)
                and selection.type in (None, job.type)
            ),
            # The status's index order, ascending, as PostgreSQL's bulk statements read it.
            # Ties in insertion order, like a stable scan.
            key=lambda job: (position_of(job).ordered[:-1], self._sequence[job.id]),
        )
        return matching[: selection.limit if limit is None else limit]

    async def prune_finished(self, older_than: Mapping[Status, timedelta], limit: int) -> int:
        await self._enter()
        check_prune_request(older_than, limit)
        now = self.clock()
        aged = sorted(
            (
                job
                for job in self._jobs.values()
                if job.status in older_than and job.updated_at < now - older_than[job.status]
            ),
            key=lambda job: (job.updated_at, self._sequence[job.id]),
        )[:limit]
        for job in aged:
            self._delete(job)
        return len(aged)

    def _delete(self, job: Job) -> None:
        del self._jobs[job.id]
        self._graphs.ended(job, DELETED, self.clock())
        del self._sequence[job.id]
        # The key is free again, as the unique index no longer holds the deleted row.
        if job.idempotency_key is not None:
            del self._by_key[job.idempotency_key]
