"""Claims and endings in the in-memory store: claims in PostgreSQL's order within a
queue's limits, outcomes and progress fenced by the lease token, renewals, and the
recovery of expired leases."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import replace
from datetime import timedelta
from uuid import UUID

from jobqueue.domain.attempts import Outcome
from jobqueue.domain.claims import claim_ranges
from jobqueue.domain.errors import LeaseLost
from jobqueue.domain.fields import DEFAULT_QUEUE
from jobqueue.domain.flow import Claimed
from jobqueue.domain.job import Job, Lease
from jobqueue.domain.outcome import LEASE_EXPIRED_ERROR, Decision
from jobqueue.domain.progress import Progress
from jobqueue.domain.status import LIVE, Status
from jobqueue.domain.transitions import Operation, sources
from tests.fakes.rows import _at, _logged
from tests.fakes.store_state import StoreState


class ClaimsAndEndings(StoreState):
    """What a worker pool asks of the store, from a claim to the ending."""

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
            if (current := self._jobs.get(lease.job_id)) is not None
            and current.status is Status.PROCESSING
            and current.lease_token == lease.token
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
