"""A job's statuses, and what each one is: declared once, read by everything else.

Pruning, the queue-depth gauge, metric labels, listing and the fake store all read these
traits instead of keeping lists of their own, so a new status is a line here, its
transitions in `job.TRANSITIONS`, and a migration for the schema's CHECK and indexes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


class Status(StrEnum):
    # Submitted with dependencies not yet met (`dependencies.py`): outside the claim's
    # index until the ending of its last dependency makes it pending.
    WAITING = "waiting"
    PENDING = "pending"
    PROCESSING = "processing"
    COMPLETED = "completed"
    FAILED = "failed"
    DEAD_LETTER = "dead_letter"
    # Stopped by an operator before it succeeded: over for good, unless retried by hand.
    CANCELLED = "cancelled"


class Phase(StrEnum):
    """Where a status stands in a job's life."""

    # Work the queue still has to do: waiting to be claimed, or running.
    LIVE = "live"
    # Awaiting a person (a dead letter): never run again by itself, never deleted by itself.
    HELD = "held"
    # Over for good: kept a while to be looked up, then deleted by retention.
    FINISHED = "finished"


class SortColumn(StrEnum):
    """The time a status is listed by: the column its index is built on."""

    RUN_AT = "run_at"
    LOCKED_UNTIL = "locked_until"
    UPDATED_AT = "updated_at"


@dataclass(frozen=True, slots=True)
class ListOrder:
    column: SortColumn
    # Newest first for history (finished and held jobs, where the latest matter most);
    # soonest first for live work (the next due job, the next lease to run out).
    descending: bool
    # Columns the listing is ordered by before `column`, as its index is: pending jobs are
    # listed as the claim takes them, queue by queue, most urgent first. Only in
    # ascending orders.
    groups: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.groups and self.descending:
            raise ValueError("a grouped listing order is ascending")


@dataclass(frozen=True, slots=True)
class StatusTraits:
    phase: Phase
    # Listing reads one status at a time, as a range of `index` in this order.
    order: ListOrder
    # The partial index holding exactly the rows of this status (and perhaps of others
    # in the same phase), in `order`'s column: listing and counting read it, never the
    # table. Checked against the schema by a test.
    index: str
    # Whether `queue` may narrow a listing. Only where the status's rows are few (or its
    # index leads with the queue) can the index range be read and filtered.
    by_queue: bool = True
    # Whether `index` holds the status's rows by type (after the status, where it holds
    # several): then one type is one range of it, and every type a merge of the types'
    # ranges.
    typed_index: bool = False
    # Where a job ends when its attempts failed (its handler's failure, its payload,
    # timeouts, a lease that ran out), not by anyone's choice: someone should hear of
    # each one (the worker's WARNING line, `jobs_failed_total`).
    failure: bool = False

    @property
    def prunable(self) -> bool:
        """Retention may delete jobs of this status once they are old enough."""
        return self.phase is Phase.FINISHED

    @property
    def counted(self) -> bool:
        """Part of the queue depth: few enough rows, in a small partial index, to count at
        every refresh. Finished jobs are history, and counting them would read every one."""
        return self.phase is not Phase.FINISHED


_SOONEST = {column: ListOrder(column, descending=False) for column in SortColumn}
_NEWEST_FINISHED = ListOrder(SortColumn.UPDATED_AT, descending=True)

# Pending jobs in their claim index's order: by queue, most urgent first, then by type
# (whose ranges claims take in turn), then due order.
_AS_CLAIMED = ListOrder(SortColumn.RUN_AT, descending=False, groups=("queue", "priority", "type"))

TRAITS: Mapping[Status, StatusTraits] = {
    # In submission order, oldest first: the order their dependencies were given in.
    Status.WAITING: StatusTraits(Phase.LIVE, _SOONEST[SortColumn.RUN_AT], "ix_jobs_waiting"),
    Status.PENDING: StatusTraits(Phase.LIVE, _AS_CLAIMED, "ix_jobs_due_by_type"),
    Status.PROCESSING: StatusTraits(
        Phase.LIVE, _SOONEST[SortColumn.LOCKED_UNTIL], "ix_jobs_lease_expiry"
    ),
    # Completed jobs are most of the table, and no index holds them by queue.
    Status.COMPLETED: StatusTraits(
        Phase.FINISHED,
        _NEWEST_FINISHED,
        "ix_jobs_finished_by_type",
        by_queue=False,
        typed_index=True,
    ),
    Status.FAILED: StatusTraits(
        Phase.FINISHED,
        _NEWEST_FINISHED,
        "ix_jobs_finished_by_type",
        typed_index=True,
        failure=True,
    ),
    # A finished or held row is never written again, so its updated_at is when it ended.
    Status.DEAD_LETTER: StatusTraits(
        Phase.HELD, _NEWEST_FINISHED, "ix_jobs_dead_letter", failure=True
    ),
    # An index of its own, by type like the one above: adding the status to that one
    # would rebuild an index of every finished row on a live table.
    Status.CANCELLED: StatusTraits(
        Phase.FINISHED, _NEWEST_FINISHED, "ix_jobs_cancelled_by_type", typed_index=True
    ),
}


# Derived, in declaration order, for the code that needs one of them as a whole.
PRUNABLE: tuple[Status, ...] = tuple(s for s in Status if TRAITS[s].prunable)
COUNTED: tuple[Status, ...] = tuple(s for s in Status if TRAITS[s].counted)
BY_QUEUE: tuple[Status, ...] = tuple(s for s in Status if TRAITS[s].by_queue)
FAILURES: tuple[Status, ...] = tuple(s for s in Status if TRAITS[s].failure)
# A job in any other status has ended (finished, or held): what a waiter waits for.
LIVE: tuple[Status, ...] = tuple(s for s in Status if TRAITS[s].phase is Phase.LIVE)
