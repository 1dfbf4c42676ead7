"""Acting on many jobs at once, as an operator does after an incident: which jobs (one
status, narrowed by queue and type), and how many one call may touch.

A call is one bounded statement: the oldest `limit` matching jobs, locked with SKIP
LOCKED so that two operators, or an operator and a worker, never wait on each other.
A caller wanting more calls again until fewer than `limit` come back.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobqueue.domain.job import MAX_TYPE_LENGTH, Operation, check_queue_name, sources
from jobqueue.domain.status import Status

MAX_BULK = 1000

# What an operator may retry, or discard (delete before retention would): jobs that
# ended without success. Live jobs are the workers'; completed ones succeeded.
ACTIONABLE: frozenset[Status] = sources(Operation.RETRY)


@dataclass(frozen=True, slots=True)
class Selection:
    """The jobs one bulk call acts on: of `status`, in `queue` and of `type` when given,
    oldest first (by when they ended), at most `limit`."""

    status: Status
    queue: str | None = None
    type: str | None = None
    limit: int = MAX_BULK

    def __post_init__(self) -> None:
        """Raise `ValueError` saying what to change."""
        if self.status not in ACTIONABLE:
            shown = " or ".join(sorted(status.value for status in ACTIONABLE))
            raise ValueError(f"status must be {shown}, got {self.status.value!r}")
        if not 1 <= self.limit <= MAX_BULK:
            raise ValueError(f"limit must be 1 to {MAX_BULK}, got {self.limit}")
        if self.queue is not None:
            check_queue_name(self.queue)
        if self.type is not None and not 1 <= len(self.type) <= MAX_TYPE_LENGTH:
            raise ValueError(f"type must be 1 to {MAX_TYPE_LENGTH} characters")
