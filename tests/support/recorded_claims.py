"""In-memory job stores that record each claim the pool makes with what the pool was
doing at the time, one of them taking a round trip per claim, for the pool's tests of
claiming and pausing."""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from datetime import timedelta

from jobqueue.domain.flow import Claimed
from jobqueue.entrypoints.worker.pool import WorkerPool
from tests.fakes import InMemoryJobStore, wall_clock


class ClaimRecordingStore(InMemoryJobStore):
    """Records every claim together with what the pool was doing when it was made."""

    def __init__(self) -> None:
        super().__init__(wall_clock)
        self.pool: WorkerPool | None = None
        self.claims: list[tuple[int, int, int]] = []  # (limit, in_flight, claimed ahead)
        self.failures_left = 0

    async def claim(
        self, limit: int, lease: timedelta, queue: str = "default", *, types: Collection[str]
    ) -> Claimed:
        assert self.pool is not None
        self.claims.append((limit, self.pool.in_flight, self.pool.claimed_ahead))
        if self.failures_left:
            self.failures_left -= 1
            raise ConnectionResetError("connection reset by peer")
        return await super().claim(limit, lease, queue, types=types)


class SlowClaimStore(ClaimRecordingStore):
    """Claims that take a measurable round trip, as a real database's do."""

    def __init__(self, claim_seconds: float) -> None:
        super().__init__()
        self.claim_seconds = claim_seconds

    async def claim(
        self, limit: int, lease: timedelta, queue: str = "default", *, types: Collection[str]
    ) -> Claimed:
        await asyncio.sleep(self.claim_seconds)
        return await super().claim(limit, lease, queue, types=types)
