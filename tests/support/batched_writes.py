"""What the tests of the pool's batched writes of endings share: an in-memory store that
records each batch (and can fail the next ones or hold them at a gate), and a registry
whose `gated` jobs wait at a gate the test opens."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from jobqueue.domain.errors import StoreUnavailable
from jobqueue.domain.job import Lease
from jobqueue.domain.outcome import Decision
from jobqueue.domain.registry import JobContext, Registry
from tests.fakes import InMemoryJobStore, ManualClock


class BatchRecordingStore(InMemoryJobStore):
    """Records each batched write; can fail the next ones or hold them at a gate."""

    def __init__(self, clock: ManualClock | None = None) -> None:
        super().__init__(clock)
        self.batches: list[list[Lease]] = []
        self.failures_left = 0
        self.hold = False
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    async def record_many(self, endings: Sequence[tuple[Lease, Decision]]) -> set[Lease]:
        self.batches.append([lease for lease, _ in endings])
        if self.hold:
            self.entered.set()
            await self.gate.wait()
        if self.failures_left:
            self.failures_left -= 1
            raise StoreUnavailable("the job store failed: connection reset")
        return await super().record_many(endings)


def gated_registry(gate: asyncio.Event, entered: list[UUID]) -> Registry:
    registry = Registry()

    @registry.handler("gated")
    async def gated(ctx: JobContext, payload: Any) -> None:
        entered.append(ctx.job_id)
        await gate.wait()

    @registry.handler("quick")
    async def quick(ctx: JobContext, payload: Any) -> None:
        pass

    return registry
