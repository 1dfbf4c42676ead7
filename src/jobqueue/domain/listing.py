"""Listing jobs of one status, a page at a time, in an order the store can keep cheaply.

Each status is listed in the order of the index that holds it, ties broken by id, so a
page is one contiguous range of that index and the next page starts where it ended
(keyset pagination): no page ever counts or skips the rows before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from uuid import UUID

from jobqueue.domain.job import MAX_TYPE_LENGTH, Job, Status

MIN_LIST_LIMIT = 1
MAX_LIST_LIMIT = 500
DEFAULT_LIST_LIMIT = 50


class SortColumn(StrEnum):
    """The time a status is ordered by: the column its index is built on."""

    RUN_AT = "run_at"
    LOCKED_UNTIL = "locked_until"
    UPDATED_AT = "updated_at"


@dataclass(frozen=True, slots=True)
class ListOrder:
    column: SortColumn
    # Newest first for history (finished and dead-lettered jobs, where the latest matter
    # most); soonest first for live work (the next due job, the next lease to run out).
    descending: bool

    def key(self, job: Job) -> datetime:
        moment: datetime | None = getattr(job, self.column.value)
        if moment is None:
            # Only locked_until can be NULL, and never on a processing job (the schema's
            # lease_while_processing check), the only status ordered by it.
            raise ValueError(f"job {job.id} has no {self.column.value} to be listed by")
        return moment

    def position(self, job: Job) -> ListPosition:
        return ListPosition(self.key(job), job.id)


LIST_ORDERS: dict[Status, ListOrder] = {
    Status.PENDING: ListOrder(SortColumn.RUN_AT, descending=False),
    Status.PROCESSING: ListOrder(SortColumn.LOCKED_UNTIL, descending=False),
    Status.COMPLETED: ListOrder(SortColumn.UPDATED_AT, descending=True),
    Status.FAILED: ListOrder(SortColumn.UPDATED_AT, descending=True),
    Status.DEAD_LETTER: ListOrder(SortColumn.UPDATED_AT, descending=True),
}


# Completed jobs are most of the table and no index holds them by type: finding the few
# of a rare type would read them all. Every other status's index holds a small part of
# the table (live work, failures, what awaits a person), so reading its range and
# filtering by type stays cheap. An index by type would make every completion pay.
TYPE_FILTERABLE = frozenset(Status) - {Status.COMPLETED}
TYPE_NOT_FILTERABLE = (
    "type cannot narrow a listing of {status} jobs: no index holds them by type; "
    "list them without type"
)


@dataclass(frozen=True, slots=True)
class ListPosition:
    """Where a page ended: the last job's sort key and id. The next page starts after it."""

    key: datetime
    job_id: UUID


@dataclass(frozen=True, slots=True)
class JobQuery:
    """Jobs of `status` (and of `type`, if given), at most `limit`, after `after`.

    `status` is required and `type` narrows only `TYPE_FILTERABLE` statuses: every
    listing reads its status's index, never the whole table.
    """

    status: Status
    type: str | None = None
    limit: int = DEFAULT_LIST_LIMIT
    after: ListPosition | None = None

    def __post_init__(self) -> None:
        if isinstance(self.limit, bool) or not isinstance(self.limit, int):
            raise ValueError(f"list limit must be an integer, got {self.limit!r}")
        if not MIN_LIST_LIMIT <= self.limit <= MAX_LIST_LIMIT:
            raise ValueError(
                f"list limit must be between {MIN_LIST_LIMIT} and {MAX_LIST_LIMIT}, "
                f"got {self.limit}"
            )
        if self.type is not None and not 1 <= len(self.type) <= MAX_TYPE_LENGTH:
            raise ValueError(f"a listed type must be 1 to {MAX_TYPE_LENGTH} characters")
        if self.type is not None and self.status not in TYPE_FILTERABLE:
            raise ValueError(TYPE_NOT_FILTERABLE.format(status=self.status.value))

    @property
    def order(self) -> ListOrder:
        return LIST_ORDERS[self.status]


@dataclass(frozen=True, slots=True)
class JobPage:
    jobs: tuple[Job, ...]
    # Where the next page starts; None when this page holds the last matching job.
    next: ListPosition | None
