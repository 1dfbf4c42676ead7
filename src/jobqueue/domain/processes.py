"""The live processes that consume queues, as each one describes itself in its heartbeats,
and what an operator learns from them: how many consume each queue, and which queues
have due jobs that no live process will ever claim.

A process is live while its last heartbeat's `expires_at` (the store's clock) is ahead:
one killed stops renewing and drops out within `ttl`, as its jobs' leases run out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

# How long a queue's due jobs may wait with no live consumer before it is warned of: a
# process starting up, or one restarting, is not worth a warning.
UNCONSUMED_GRACE = timedelta(seconds=30)


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    """A worker process as its heartbeat describes it."""

    id: UUID
    host: str
    pid: int
    version: str
    # The queues it claims from, and the job types it can run.
    queues: tuple[str, ...]
    types: tuple[str, ...]
    # Its concurrency (every pool's together), and the attempts running at the heartbeat.
    concurrency: int
    running: int
    # Each queue's share of `concurrency`, in `queues`' order; empty when not known (a
    # process of an earlier version).
    queue_concurrency: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.queue_concurrency and len(self.queue_concurrency) != len(self.queues):
            raise ValueError("queue_concurrency holds one number per queue, in their order")

    def concurrency_of(self) -> tuple[tuple[str, int | None], ...]:
        """Each queue with its share of the concurrency (None when not known)."""
        shares = self.queue_concurrency or (None,) * len(self.queues)
        return tuple(zip(self.queues, shares, strict=True))


@dataclass(frozen=True, slots=True)
class LiveProcess:
    """A process the registry holds as live, with when it started and last beat, and when
    the registry was read: all on the store's clock, so ages taken from `read_at` are
    right whatever the reader's clock says."""

    info: ProcessInfo
    started_at: datetime
    heartbeat_at: datetime
    read_at: datetime


@dataclass(frozen=True, slots=True)
class Unconsumed:
    """A queue whose jobs have been due for a while with no live process consuming it."""

    queue: str
    due: int
