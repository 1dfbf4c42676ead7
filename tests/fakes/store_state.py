"""The in-memory store's state (`InMemoryJobStore` in `store.py` is made of it and of the
operations beside it): its tables, and the steps every operation takes."""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict
from dataclasses import replace
from datetime import datetime
from typing import Any
from uuid import UUID

from jobqueue.domain.errors import InvalidTransition, JobNotFound, LeaseLost, StoreUnavailable
from jobqueue.domain.job import Job, Lease
from jobqueue.domain.periodic import LastSlot
from jobqueue.domain.status import Status
from jobqueue.domain.transitions import Operation, sources, targets
from tests.fakes.clocks import Clock, ManualClock
from tests.fakes.graphs import FakeGraphs
from tests.fakes.limits import FakeLimits
from tests.fakes.rows import _detached


class StoreState:
    """The tables of the in-memory store, and the steps that its operations share: the
    suspension of a round trip, the lookups by id and by lease, the holder of a unique
    key, and the checked move of a job from one status to another."""

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
