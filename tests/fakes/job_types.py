"""Job types for the tests: a `JobTypeCatalog` in memory, and the types that the
store-level tests submit."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from jobqueue.domain.job_types import JobType, PublishedType
from tests.fakes.clocks import Clock, wall_clock


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
