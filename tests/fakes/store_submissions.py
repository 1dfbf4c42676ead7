"""Submitting to the in-memory store: one job, many (all or none), a graph of jobs that
wait for jobs, and a periodic job's slot."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from jobqueue.domain.dependencies import Step
from jobqueue.domain.errors import IdempotencyConflict, InvalidJob
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.periodic import LastSlot
from jobqueue.domain.ports import Submitted
from tests.fakes.refusals import _jsonb, _refusal
from tests.fakes.rows import _detached
from tests.fakes.store_state import StoreState


class Submissions(StoreState):
    """Submissions, checked as PostgreSQL's constraints check them."""

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
