"""Acting on many jobs at once, as an operator does after an incident: which jobs (one
status, narrowed by queue and type), what is done to them, and how many one call may
touch.

A call is one bounded statement: the oldest `limit` matching jobs, locked with SKIP
LOCKED so that two operators, or an operator and a worker, never wait on each other.
A caller wanting more calls again until fewer than `limit` come back.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobqueue.domain.fields import MAX_TYPE_LENGTH, check_queue_name
from jobqueue.domain.status import TRAITS, Status
from jobqueue.domain.transitions import Operation, sources

# The most jobs one bulk call acts on.
MAX_SELECTED = 1000

# What an operator may retry, or discard (delete before retention would): jobs that
# ended without success. Live jobs are the workers'; completed ones succeeded.
ACTIONABLE: frozenset[Status] = sources(Operation.RETRY)
# What an operator may cancel: jobs that have not finished, running or not.
CANCELLABLE: frozenset[Status] = sources(Operation.CANCEL)
# What an operator may reschedule or run now: jobs waiting for their claim.
RESCHEDULABLE: frozenset[Status] = sources(Operation.RESCHEDULE)

# The statuses each bulk action may select; a discard deletes what a retry could requeue.
SELECTABLE: dict[Operation, frozenset[Status]] = {
    Operation.RETRY: ACTIONABLE,
    Operation.CANCEL: CANCELLABLE,
}


@dataclass(frozen=True, slots=True)
class Selection:
    """The jobs one bulk call of `operation` acts on: of `status`, in `queue` and of `type`
    when given, at most `limit`, in the order their status's index holds them (oldest
    ended first; pending jobs as claims take them; running ones soonest lease end first)."""

    status: Status
    queue: str | None = None
    type: str | None = None
    limit: int = MAX_SELECTED
    operation: Operation = Operation.RETRY

    def __post_init__(self) -> None:
        """Raise `ValueError` saying what to change."""
        allowed = SELECTABLE[self.operation]
        if self.status not in allowed:
            shown = " or ".join(sorted(status.value for status in allowed))
            raise ValueError(f"status must be {shown}, got {self.status.value!r}")
        if not 1 <= self.limit <= MAX_SELECTED:
            raise ValueError(f"limit must be 1 to {MAX_SELECTED}, got {self.limit}")
        if self.queue is not None:
            check_queue_name(self.queue)
        if self.type is not None and not 1 <= len(self.type) <= MAX_TYPE_LENGTH:
            raise ValueError(f"type must be 1 to {MAX_TYPE_LENGTH} characters")

    def require(self, operation: Operation) -> None:
        """Raise `ValueError` unless this selection was made for `operation` (a discard
        selects as a retry does)."""
        if self.operation is not operation:
            raise ValueError(f"a selection to {self.operation} cannot be used to {operation}")


# How many jobs of its status a count of a selection reads at most, before it is shown to
# an operator for confirmation: a queue or type its status's index does not lead with is
# filtered row by row, and a rare one among a million dead letters would read them all.
COUNT_BUDGET = 3 * MAX_SELECTED


def index_prefix(status: Status) -> frozenset[str]:
    """The selection fields `status`'s index leads with (after the status): narrowed by
    them, a selection is one range of the index. Other fields are filtered row by row."""
    traits = TRAITS[status]
    if traits.typed_index:
        return frozenset({"type"})
    return frozenset(traits.order.groups[:1])


@dataclass(frozen=True, slots=True)
class SelectionCount:
    """How many jobs a selection matches among the first `COUNT_BUDGET` of its index
    range (in the index's order), counted to one past its limit where it can stop."""

    matched: int
    # Whether the count read every job the selection could match (else `matched` is a
    # lower bound: more may match beyond what was read).
    complete: bool
