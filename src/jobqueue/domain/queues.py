"""Queues as an operator sees them: whether each is paused, and what waits in it.

A queue exists as soon as a job names it; only a pause and limits (`domain/flow.py`) are
stored about the queue itself. A paused queue claims nothing (the claim checks it in the
same statement, so no claim that starts after the pause commits can take a job) while its
running jobs finish.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from jobqueue.domain.flow import NO_LIMITS, LimitsSource, QueueLimits
from jobqueue.domain.status import COUNTED, Status


@dataclass(frozen=True, slots=True)
class QueueState:
    name: str
    # When an operator paused it, by the store's clock; None while it runs.
    paused_at: datetime | None
    limits: QueueLimits = NO_LIMITS
    # Who set `limits`; None while it has none.
    limits_source: LimitsSource | None = None
    # The limits' use now: its running jobs (with a concurrency limit, on the queue or
    # per key), its starts within
    # the rate's window (with a rate); None without such a limit.
    running: int | None = None
    started: int | None = None
    # Each rated type's starts within its window now, by type.
    type_started: tuple[tuple[str, int], ...] = ()

    @property
    def paused(self) -> bool:
        return self.paused_at is not None


@dataclass(frozen=True, slots=True)
class QueueSummary:
    """One queue's state and the work in it, as `GET /queues` shows it.

    Only the counted statuses (`status.COUNTED`: live and held jobs) are counted: each
    has a small partial index. Finished jobs are history; counting them per queue would
    read every one of them.
    """

    state: QueueState
    counts: Mapping[Status, int]
    # Pending jobs due now (the rest of `counts[PENDING]` is scheduled for later).
    due: int
    # How long the longest-waiting due job has been due, by the store's clock.
    oldest_due_age: timedelta | None
    # How many live processes consume it (`domain/processes.py`).
    consumers: int = 0

    @property
    def scheduled(self) -> int:
        """Pending jobs due later."""
        return self.counts[Status.PENDING] - self.due

    @property
    def unconsumed(self) -> bool:
        """Due jobs wait and no live process consumes the queue: they wait for ever."""
        return self.due > 0 and self.consumers == 0

    def __post_init__(self) -> None:
        if set(self.counts) != set(COUNTED):
            raise ValueError("a queue summary counts exactly the counted statuses")
