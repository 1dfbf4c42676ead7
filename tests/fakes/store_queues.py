"""Queues in the in-memory store: pauses, limits, and the summaries counted from the jobs."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from jobqueue.domain.flow import QueueLimits
from jobqueue.domain.queues import QueueState, QueueSummary
from jobqueue.domain.status import COUNTED, Status
from tests.fakes.store_state import StoreState


class Queues(StoreState):
    """A queue's state and counts, as the store's queue rows and counts give them."""

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

    async def prune_key_starts(self, limit: int) -> int:
        await self._enter()
        return self._limits.forget_key_starts(self.clock(), limit)
