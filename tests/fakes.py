"""In-memory implementations of the ports, for unit tests.

`InMemoryJobStore` behaves like the PostgreSQL store (docs/design.md, `domain/ports.py`):
each operation is one compare-and-swap checked against the domain's transition table,
outcome writes are fenced by the lease token, and times come from an injectable clock
so that tests can move time instead of waiting for it.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import math
import uuid
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, is_dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from jobqueue.domain.attempts import (
    AttemptRecord,
    Outcome,
    appended,
    holds_final_attempt,
)
from jobqueue.domain.bulk import COUNT_BUDGET, Selection, SelectionCount, index_prefix
from jobqueue.domain.claims import claim_ranges
from jobqueue.domain.dependencies import Dependency, Step, WorkflowNotFound
from jobqueue.domain.errors import (
    IdempotencyConflict,
    InvalidJob,
    InvalidPayload,
    InvalidTransition,
    JobNotFound,
    LeaseLost,
    StoreUnavailable,
    UniqueKeyHeld,
)
from jobqueue.domain.fields import DEFAULT_QUEUE, MAX_ATTEMPTS, MIN_ATTEMPTS, JsonValue
from jobqueue.domain.flow import Claimed, QueueLimits
from jobqueue.domain.job import Job, Lease, NewJob
from jobqueue.domain.job_types import JobType, PublishedType
from jobqueue.domain.listing import JobPage, JobQuery, KeyKind, KeyLookup, page_of, position_of
from jobqueue.domain.outcome import LEASE_EXPIRED_ERROR, Decision
from jobqueue.domain.periodic import LastSlot
from jobqueue.domain.ports import Submitted
from jobqueue.domain.progress import Progress
from jobqueue.domain.queues import QueueState, QueueSummary
from jobqueue.domain.retention import check_prune_request
from jobqueue.domain.status import COUNTED, LIVE, Status
from jobqueue.domain.transitions import DELETABLE, DELETE, Operation, sources, targets
from tests.fake_listing import FakeListing
from tests.support.fake_flow import FakeLimits
from tests.support.fake_graphs import DELETED, FakeGraphs

Clock = Callable[[], datetime]


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self, start: datetime = datetime(2030, 1, 1, tzinfo=UTC)) -> None:
        self._now = start

    def __call__(self) -> datetime:
        return self._now

    def advance(self, by: timedelta) -> None:
        self._now += by


def wall_clock() -> datetime:
    return datetime.now(UTC)


class InMemoryJobStore:
    """`JobStore` over a dict. Set `available = False` to make every call fail as an
    unreachable database does."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock if clock is not None else ManualClock()
        self.available = True
        self._jobs: dict[UUID, Job] = {}
        # Insertion order breaks ties between equal run_at values, like a stable scan.
        self._sequence: dict[UUID, int] = {}
        self._counter = itertools.count()
        self._by_key: dict[str, UUID] = {}
        # Queues paused, and since when; a resumed queue keeps its row, as in PostgreSQL.
        self._paused: dict[str, datetime | None] = {}
        # Queues' limits and the starts within their rate's windows.
        self._limits = FakeLimits()
        # The jobs a `record_and_claim` ends: their slots are free for its claim.
        self._freeing: set[UUID] = set()
        # Who claims, as the attempt log shows it.
        self.worker = "in-memory"
        # How many outcome batches went out with a claim (`record_and_claim`).
        self.record_and_claim_calls = 0
        # The jobs a cancel took from a running attempt, as PostgreSQL notifies them.
        self.cancels_announced: list[UUID] = []
        # The jobs someone waits for (`watch`), whose endings PostgreSQL announces.
        self.watched: set[UUID] = set()
        # Claims of each queue so far: which type each one starts with (`claim_ranges`).
        self._turns: defaultdict[str, int] = defaultdict(int)
        # The last slot each periodic job ran.
        self._slots: dict[str, LastSlot] = {}
        # Who waits for whom, and the release of dependents.
        self._graphs = FakeGraphs(lambda: self._jobs)

    def jobs(self) -> list[Job]:
        return list(self._jobs.values())

    async def submit(self, new: NewJob) -> Submitted:
        if new.depends_on:
            (submitted,) = await self.submit_graph([Step(new)])
            return submitted
        await self._enter()
        refusal = _refusal(new)
        if refusal is not None:
            raise InvalidJob(f"the job store refused the job: {refusal}")
        if new.idempotency_key is not None and new.idempotency_key in self._by_key:
            earlier = self._jobs[self._by_key[new.idempotency_key]]
            if (
                earlier.type != new.type
                or earlier.max_attempts != new.max_attempts
                or _jsonb(earlier.payload) != _jsonb(new.payload)
            ):
                raise IdempotencyConflict(new.idempotency_key)
            return Submitted(_detached(earlier), replayed=True)
        now = self.clock()
        holder = self._unique_holder(new.stored_unique_key(now))
        if holder is not None:
            return Submitted(_detached(holder), replayed=False, duplicate=True)
        # The payload a copy, as a database keeps: the caller may go on mutating its own.
        job = replace(new, payload=copy.deepcopy(new.payload)).stored(uuid.uuid4(), now)
        self._jobs[job.id] = job
        self._sequence[job.id] = next(self._counter)
        if new.idempotency_key is not None:
            self._by_key[new.idempotency_key] = job.id
        return Submitted(_detached(job), replayed=False)

    async def submit_many(self, news: Sequence[NewJob]) -> Sequence[Submitted]:
        if any(new.depends_on for new in news):
            return await self.submit_graph([Step(new) for new in news])
        # All or none, as one transaction: a refusal of any job restores the table.
        saved = (dict(self._jobs), dict(self._sequence), dict(self._by_key))
        try:
            return [await self.submit(new) for new in news]
        except BaseException:
            self._jobs, self._sequence, self._by_key = saved
            raise

    async def submit_graph(self, steps: Sequence[Step]) -> Sequence[Submitted]:
        await self._enter()
        saved = (dict(self._jobs), self._graphs.snapshot())
        try:
            for step in steps:
                refusal = _refusal(step.new)
                if refusal is not None:
                    raise InvalidJob(f"the job store refused the job: {refusal}")
            ids = [uuid.uuid4() for _ in steps]
            placed, workflow_id = self._graphs.placed(steps, ids)
        except BaseException:
            self._jobs, graphs = saved
            self._graphs.restore(graphs)
            raise
        now = self.clock()
        submitted = []
        for each in placed:
            new = replace(each.new, payload=copy.deepcopy(each.new.payload))
            job = replace(
                new.stored(each.id, now),
                status=each.status,
                workflow_id=workflow_id,
                waiting_for=each.waiting_for,
            )
            self._jobs[job.id] = job
            self._sequence[job.id] = next(self._counter)
            submitted.append(Submitted(_detached(job), replayed=False))
        return submitted

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

    async def get(self, job_id: UUID) -> Job:
        await self._enter()
        return _detached(self._existing(job_id))

    async def claim(
        self,
        limit: int,
        lease: timedelta,
        queue: str = DEFAULT_QUEUE,
        *,
        types: Collection[str],
    ) -> Claimed:
        await self._enter()
        return self._claim(limit, lease, queue, types)

    async def record_and_claim(
        self,
        endings: Sequence[tuple[Lease, Decision]],
        limit: int,
        lease: timedelta,
        queue: str = DEFAULT_QUEUE,
        *,
        types: Collection[str],
    ) -> tuple[set[Lease], Claimed]:
        # Through the two public methods, so that a test's store which fails or holds one
        # of them does the same here. Claimed first, as PostgreSQL's one snapshot does:
        # a job the endings make due again is not claimed by the same call.
        before = dict(self._jobs)
        self._freeing = {
            lease.job_id
            for lease, _ in endings
            if (held := self._jobs.get(lease.job_id)) is not None
            and held.status is Status.PROCESSING
            and held.lease_token == lease.token
        }
        try:
            claimed = await self.claim(limit, lease, queue, types=types)
        finally:
            self._freeing = set()
        try:
            held = await self.record_many(endings)
        except BaseException:
            # One statement: all or nothing. Only the jobs just claimed are put back, as
            # nobody else can have touched them since.
            for job in claimed:
                self._jobs[job.id] = before[job.id]
            raise
        self.record_and_claim_calls += 1
        return held, claimed

    def _claim(self, limit: int, lease: timedelta, queue: str, types: Collection[str]) -> Claimed:
        if limit < 1:
            raise ValueError(f"claim limit must be at least 1, got {limit}")
        if lease <= timedelta(0):
            raise ValueError(f"lease must be positive, got {lease}")
        # The ranges in the order PostgreSQL's claim reads them, one type further on at
        # every claim of the queue.
        ranges = claim_ranges(types, self._turns[queue])
        self._turns[queue] += 1
        now = self.clock()
        if self._paused.get(queue) is not None:
            return Claimed()
        running = [
            job
            for job in self._jobs.values()
            if job.queue == queue
            and job.status is Status.PROCESSING
            and job.id not in self._freeing
        ]
        headroom = self._limits.headroom(queue, len(running), now)
        allowed = min(
            [limit] + [left for left in (headroom.concurrency, headroom.rate) if left is not None]
        )
        position = {each: index for index, each in enumerate(ranges)}
        due = sorted(
            (
                job
                for job in self._jobs.values()
                if job.status in sources(Operation.CLAIM)
                and job.queue == queue
                and job.type in types
                and job.run_at <= now
            ),
            key=lambda job: (position[job.priority, job.type], job.run_at, self._sequence[job.id]),
        )
        if self._limits.limits(queue).keyed:
            due, headroom = self._limits.rotation(
                queue, due, running, max(allowed, 0), headroom, now
            )
        due, turns = self._limits.by_type_rates(queue, due, types, now)
        due = due[: max(allowed, 0)]
        self._limits.started(queue, len(due), now)
        taken = [
            self._move(
                job,
                Operation.CLAIM,
                Status.PROCESSING,
                now,
                attempts=job.attempts + 1,
                lease_token=job.lease_token + 1,
                locked_until=now + lease,
                started_at=now,
                worker=self.worker,
            )
            for job in due
        ]
        headroom = self._limits.types_started(queue, taken, turns, headroom, now)
        return Claimed.within(taken, limit, headroom)

    async def record_many(self, endings: Sequence[tuple[Lease, Decision]]) -> set[Lease]:
        await self._enter()
        return self._record(endings)

    def _record(self, endings: Sequence[tuple[Lease, Decision]]) -> set[Lease]:
        now = self.clock()
        held: set[Lease] = set()
        for lease, decision in endings:
            try:
                job = self._fenced(lease, decision.operation)
            except LeaseLost:
                continue
            retried = decision.status is Status.PENDING and not decision.gives_back_attempt
            self._move(
                job,
                decision.operation,
                decision.status,
                now,
                attempt_log=_logged(job, Outcome.RETRIED, decision.error, now)
                if retried
                else job.attempt_log,
                locked_until=None,
                run_at=job.run_at if decision.delay is None else now + decision.delay,
                last_error=job.last_error if decision.error is None else decision.error,
                attempts=max(job.attempts - 1, 0) if decision.gives_back_attempt else job.attempts,
                snoozes=job.snoozes + 1 if decision.snoozed else job.snoozes,
                result=job.result if decision.result is None else json.loads(decision.result),
                progress=job.progress if decision.progress is None else _at(decision.progress, now),
            )
            held.add(lease)
        return held

    async def record_progress(self, reports: Sequence[tuple[Lease, Progress]]) -> set[Lease]:
        await self._enter()
        now = self.clock()
        held: set[Lease] = set()
        for lease, progress in reports:
            job = self._jobs.get(lease.job_id)
            if job is None or job.status is not Status.PROCESSING or job.lease_token != lease.token:
                continue
            self._jobs[job.id] = replace(job, progress=_at(progress, now))
            held.add(lease)
        return held

    async def watch(self, job_id: UUID) -> None:
        await self._enter()
        job = self._jobs.get(job_id)
        if job is not None and job.status in LIVE:
            self.watched.add(job_id)

    async def renew(self, leases: Sequence[Lease], lease: timedelta) -> set[Lease]:
        await self._enter()
        if lease <= timedelta(0):
            raise ValueError(f"lease must be positive, got {lease}")
        now = self.clock()
        held: set[Lease] = set()
        for each in leases:
            job = self._jobs.get(each.job_id)
            if job is None or job.status is not Status.PROCESSING or job.lease_token != each.token:
                continue
            self._jobs[job.id] = replace(job, locked_until=now + lease)
            held.add(each)
        return held

    async def retry(self, job_id: UUID) -> Job:
        await self._enter()
        job = self._existing(job_id)
        if job.status not in sources(Operation.RETRY):
            raise InvalidTransition(job_id, Operation.RETRY, job.status)
        return self._retry(job)

    def _unique_holder(self, key: str | None, but: UUID | None = None) -> Job | None:
        """The job holding unique key `key` in a status it counts in, as the unique index
        of PostgreSQL decides."""
        if key is None:
            return None
        return next(
            (
                job
                for job in self._jobs.values()
                if job.unique_key == key
                and job.unique_states is not None
                and job.status.value in job.unique_states
                and job.id != but
            ),
            None,
        )

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

    async def recover_expired(self, limit: int) -> Sequence[Job]:
        await self._enter()
        if limit < 1:
            raise ValueError(f"recovery limit must be at least 1, got {limit}")
        now = self.clock()
        expired = sorted(
            (
                job
                for job in self._jobs.values()
                if job.status in sources(Operation.RECOVER)
                and job.locked_until is not None
                and job.locked_until < now
            ),
            key=lambda job: (job.locked_until, self._sequence[job.id]),
        )[:limit]
        return [
            self._move(
                job,
                Operation.RECOVER,
                Status.DEAD_LETTER if job.is_last_attempt else Status.PENDING,
                now,
                locked_until=None,
                # A dead letter is not due; only a job going back to pending is due now.
                run_at=job.run_at if job.is_last_attempt else now,
                attempt_log=job.attempt_log
                if job.is_last_attempt
                else _logged(job, Outcome.LEASE_EXPIRED, LEASE_EXPIRED_ERROR, now),
                last_error=LEASE_EXPIRED_ERROR,
            )
            for job in expired
        ]

    async def prune_key_starts(self, limit: int) -> int:
        await self._enter()
        return self._limits.forget_key_starts(self.clock(), limit)

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

    async def list_jobs(self, query: JobQuery) -> JobPage:
        await self._enter()
        listing = FakeListing(query)
        of_status = [job for job in self._jobs.values() if job.status is query.status]
        in_range = listing.range_of(of_status)
        if query.search is None:
            return page_of(query, [_listed(job) for job in in_range[: query.limit + 1]])
        read, stop = listing.searched(in_range, {job.type for job in of_status})
        matching = [_listed(job) for job in read if query.search.matches(job)]
        return page_of(query, matching[: query.limit + 1], stop, len(read))

    async def find_by_key(self, lookup: KeyLookup) -> Job | None:
        await self._enter()
        if lookup.kind is KeyKind.UNIQUE:
            found = self._unique_holder(lookup.key)
        else:
            held = self._by_key.get(lookup.key)
            found = None if held is None else self._jobs.get(held)
        return None if found is None else _detached(found)

    async def pause_queue(self, queue: str) -> QueueState:
        await self._enter()
        paused_at = self._paused.get(queue)
        self._paused[queue] = paused_at if paused_at is not None else self.clock()
        return self._state(queue)

    async def resume_queue(self, queue: str) -> QueueState:
        await self._enter()
        self._paused[queue] = None
        return self._state(queue)

    async def paused_queues(self, queues: Sequence[str]) -> set[str]:
        await self._enter()
        return {queue for queue in queues if self._paused.get(queue) is not None}

    async def set_queue_limits(self, queue: str, limits: QueueLimits) -> QueueState:
        await self._enter()
        self._limits.set(queue, limits)
        return self._state(queue)

    async def declare_queue_limits(self, queue: str, limits: QueueLimits) -> QueueState | None:
        await self._enter()
        return self._state(queue) if self._limits.declare(queue, limits) else None

    def _state(self, queue: str) -> QueueState:
        running = sum(
            job.queue == queue and job.status is Status.PROCESSING for job in self._jobs.values()
        )
        return self._limits.state(queue, self._paused.get(queue), running, self.clock())

    async def queue_summaries(self, max_age: timedelta | None = None) -> Sequence[QueueSummary]:
        # Counting a few jobs in memory costs nothing: always counted now.
        await self._enter()
        now = self.clock()
        counted = [job for job in self._jobs.values() if job.status in COUNTED]
        names = sorted({job.queue for job in counted} | set(self._paused) | self._limits.queues)
        summaries = []
        for name in names:
            mine = [job for job in counted if job.queue == name]
            due = [job.run_at for job in mine if job.status is Status.PENDING and job.run_at <= now]
            summaries.append(
                QueueSummary(
                    self._state(name),
                    {status: sum(job.status is status for job in mine) for status in COUNTED},
                    len(due),
                    now - min(due) if due else None,
                )
            )
        return summaries

    async def queue_summary(self, queue: str, max_age: timedelta | None = None) -> QueueSummary:
        for summary in await self.queue_summaries():
            if summary.state.name == queue:
                return summary
        return QueueSummary(self._state(queue), dict.fromkeys(COUNTED, 0), 0, None)

    async def insert_slot(
        self, name: str, slot: datetime, new: NewJob, *, missed: bool = False
    ) -> Job | None:
        await self._enter()
        last = self._slots.get(name)
        if (missed and last is None) or (last is not None and slot <= last.slot):
            return None
        # Taken before the insert suspends, as the store's row lock orders its statements.
        self._slots[name] = LastSlot(slot, None)
        submitted = await self.submit(new)
        if submitted.duplicate or submitted.replayed:
            return None
        if self._slots[name].slot == slot:
            self._slots[name] = LastSlot(slot, submitted.job.id)
        return submitted.job

    async def last_slots(self) -> Mapping[str, LastSlot]:
        await self._enter()
        # A slot's job while it exists, as the store's join finds it.
        return {
            name: replace(last, job_id=last.job_id if last.job_id in self._jobs else None)
            for name, last in self._slots.items()
        }

    async def ping(self) -> None:
        await self._enter()

    # --- internals ----------------------------------------------------------------------

    async def _enter(self) -> None:
        # A real store suspends on every call; so does this one, so that tests see the
        # interleavings a database round trip allows.
        await asyncio.sleep(0)
        if not self.available:
            raise StoreUnavailable("the in-memory store is switched off")

    def _existing(self, job_id: UUID) -> Job:
        try:
            return self._jobs[job_id]
        except KeyError:
            raise JobNotFound(job_id) from None

    def _fenced(self, lease: Lease, operation: Operation) -> Job:
        # Zero rows matched, whatever the reason (unknown id, wrong status, newer token),
        # is one answer: this claim no longer holds the job.
        job = self._jobs.get(lease.job_id)
        if job is None or job.status not in sources(operation) or job.lease_token != lease.token:
            raise LeaseLost(lease.job_id, lease.token)
        return job

    def _move(
        self, job: Job, operation: Operation, target: Status, now: datetime, **changes: Any
    ) -> Job:
        # `now` is read once per operation by the caller: PostgreSQL's now() is one instant
        # per statement, so every time an operation writes (updated_at, run_at,
        # locked_until) is derived from the same moment.
        if target not in targets(operation, job.status):
            raise InvalidTransition(job.id, operation, job.status)
        moved = replace(job, status=target, updated_at=now, **changes)
        # The schema's lease_while_processing constraint.
        assert (moved.status is Status.PROCESSING) == (moved.locked_until is not None)
        self._jobs[job.id] = moved
        self._graphs.ended(job, target, now, operation)
        return _detached(self._jobs[job.id])


def _logged(
    job: Job, outcome: Outcome, error: str | None, finished_at: datetime
) -> tuple[AttemptRecord, ...]:
    ended = AttemptRecord(job.attempts, outcome, error, job.started_at, finished_at, job.worker)
    return appended(job.attempt_log, ended)


def _at(progress: Progress, now: datetime) -> Progress:
    return replace(progress, at=now)


def _detached(job: Job) -> Job:
    # Every job handed out carries its own payload, as rows read from a database do, so a
    # caller mutating it cannot change what the store holds.
    return replace(job, payload=copy.deepcopy(job.payload))


def _listed(job: Job) -> Job:
    # A page leaves results out, as the store's listings do (`queries/sql.listed`).
    return replace(_detached(job), result=None)


def _refusal(new: NewJob) -> str | None:
    """Why PostgreSQL would refuse to store `new` (a check constraint, a character that
    `text` or `jsonb` cannot hold, a number JSON cannot spell), or None."""
    if not MIN_ATTEMPTS <= new.max_attempts <= MAX_ATTEMPTS:
        return f"max_attempts {new.max_attempts} violates the max_attempts check"
    for name, text in (
        ("type", new.type),
        ("idempotency_key", new.idempotency_key),
        ("traceparent", new.traceparent),
    ):
        if text is not None and not _storable_text(text):
            return f"{name} holds a character PostgreSQL cannot store"
    stack: list[object] = [new.payload]
    # Containers already walked: a hand-built NewJob may hold a cycle, which must not
    # hang the walk (the serialiser refuses it on the way to the database).
    walked: set[int] = set()
    while stack:
        item = stack.pop()
        if isinstance(item, str) and not _storable_text(item):
            return "the payload holds a character PostgreSQL cannot store"
        if isinstance(item, float) and not math.isfinite(item):
            return f"the payload holds {item}, which JSON cannot represent"
        if isinstance(item, dict | list):
            if id(item) in walked:
                continue
            walked.add(id(item))
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def _storable_text(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


def _jsonb(value: JsonValue) -> object:
    """A form in which two JSON values compare equal exactly when PostgreSQL's jsonb
    says so: numbers by value (1 = 1.0), booleans apart from numbers, keys unordered."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", Decimal(repr(value)))
    if isinstance(value, list):
        return ("array", tuple(_jsonb(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((key, _jsonb(item)) for key, item in value.items()))
    return ("scalar", value)


class DataclassDecoder:
    """`PayloadDecoder` for dataclass payload types: fields from a JSON object."""

    def decode(self, job_type: str, payload: JsonValue, into: type[Any]) -> Any:
        if not is_dataclass(into) or not isinstance(payload, dict):
            raise InvalidPayload(job_type, f"expected an object for {into.__name__}")
        try:
            return into(**payload)
        except TypeError as error:
            raise InvalidPayload(job_type, str(error)) from error


@dataclass
class RecordingObserver:
    """`PoolObserver` that keeps every call, for assertions."""

    started: list[Job] = field(default_factory=list)
    finished: list[tuple[Job, Decision, float]] = field(default_factory=list)
    lost: list[Job] = field(default_factory=list)
    cancelled: list[Job] = field(default_factory=list)
    retried_writes: list[tuple[Job, int]] = field(default_factory=list)
    unrecorded: list[Job] = field(default_factory=list)
    recoveries: list[list[Job]] = field(default_factory=list)

    def attempt_started(self, job: Job) -> None:
        self.started.append(job)

    def attempt_finished(self, job: Job, decision: Decision, duration_seconds: float) -> None:
        self.finished.append((job, decision, duration_seconds))

    def lease_lost(self, job: Job) -> None:
        self.lost.append(job)

    def attempt_cancelled(self, job: Job) -> None:
        self.cancelled.append(job)

    def outcome_retried(self, job: Job, tries: int) -> None:
        self.retried_writes.append((job, tries))

    def outcome_unrecorded(self, job: Job) -> None:
        self.unrecorded.append(job)

    def recovered(self, jobs: Sequence[Job]) -> None:
        self.recoveries.append(list(jobs))


class InMemoryJobTypes:
    """`JobTypeCatalog` in memory: the latest publication of each type, by name. `reads`
    counts the reads; `failing` makes the next calls raise it."""

    def __init__(self, clock: Clock = wall_clock) -> None:
        self._clock = clock
        self._types: dict[str, PublishedType] = {}
        self.reads = 0
        self.failing: Exception | None = None

    async def publish(self, types: Sequence[JobType], by: str) -> None:
        if self.failing is not None:
            raise self.failing
        for each in types:
            self._types[each.name] = PublishedType(each, self._clock(), by)

    async def published(self) -> list[PublishedType]:
        self.reads += 1
        if self.failing is not None:
            raise self.failing
        # Yields, as a real read does: concurrent readers interleave here.
        await asyncio.sleep(0)
        return [self._types[name] for name in sorted(self._types)]


# Every job type the store-level tests submit: what their claims take, as a worker
# process claims the types it has handlers for.
TEST_TYPES = frozenset(
    {
         "any", "anything", "b", "brief", "bulk", "charge", "clock-probe", "done", "doomed",
         "due", "eager", "echo", "email", "expiring", "fax", "flaky", "gated", "greet",
         "held", "invoice", "later", "long", "newer", "noop", "nope", "older", "order",
         "other", "patient", "plain", "report", "runs_elsewhere", "seeded", "send_invoice",
         "sleep", "sms", "stuck_sync", "sync", "sync_account", "t", "uniq", "webhook",
         "work", "x",
    }
)  # fmt: skip
