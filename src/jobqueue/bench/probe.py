"""The no-op handler the pools run, and the clock readings it leaves behind."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection
from typing import Any
from uuid import UUID

from jobqueue.bench.worker_handlers import NOOP_TYPE
from jobqueue.domain.job import NewJob
from jobqueue.domain.registry import JobContext, Registry


class StartProbe:
    """When each job's handler began (`time.perf_counter()`), by job id."""

    def __init__(self) -> None:
        self.started: dict[UUID, float] = {}
        self._awaited: set[UUID] = set()
        self._all_started = asyncio.Event()

    def record(self, job_id: UUID) -> None:
        self.started[job_id] = time.perf_counter()
        self._awaited.discard(job_id)
        if not self._awaited:
            self._all_started.set()

    async def wait_for(self, job_ids: Collection[UUID]) -> None:
        """Return once every job in `job_ids` has started."""
        self._awaited = set(job_ids) - self.started.keys()
        if not self._awaited:
            return
        self._all_started.clear()
        await self._all_started.wait()


def noop_registry(probe: StartProbe) -> Registry:
    registry = Registry()

    # No payload type: nothing to decode, so the run measures the queue, not msgspec.
    @registry.handler(NOOP_TYPE)
    async def noop(ctx: JobContext, payload: Any) -> None:
        probe.record(ctx.job_id)

    return registry


def noop_job() -> NewJob:
    return NewJob.build(type=NOOP_TYPE, default_max_attempts=3, registered=[NOOP_TYPE])
