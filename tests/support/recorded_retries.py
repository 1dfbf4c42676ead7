"""An in-memory job store that records the delay of every retry the pool writes through
it, for the pool's tests of backoff."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from jobqueue.domain.job import Lease
from jobqueue.domain.outcome import Decision
from jobqueue.domain.transitions import Operation
from tests.fakes import InMemoryJobStore, wall_clock


class RetryRecordingStore(InMemoryJobStore):
    def __init__(self) -> None:
        super().__init__(wall_clock)
        self.retries: list[tuple[int, timedelta]] = []

    async def record_many(self, endings: Sequence[tuple[Lease, Decision]]) -> Any:
        for lease, decision in endings:
            if decision.operation is Operation.BACKOFF and decision.delay is not None:
                attempt = next(j.attempts for j in self.jobs() if j.id == lease.job_id)
                self.retries.append((attempt, decision.delay))
        return await super().record_many(endings)
