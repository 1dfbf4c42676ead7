"""Listing jobs of one status, a page at a time, in an order the store can keep cheaply.

Each status is listed in the order of the index that holds it, ties broken by id, so a
page is one contiguous range of that index and the next page starts where it ended
(keyset pagination): no page ever counts or skips the rows before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from jobqueue.domain.fields import MAX_TYPE_LENGTH, check_queue_name
from jobqueue.domain.job import Job
from jobqueue.domain.status import TRAITS, ListOrder, Status

MIN_LIST_LIMIT = 1
MAX_LIST_LIMIT = 500
DEFAULT_LIST_LIMIT = 50

NOT_BY_QUEUE = (
    "queue cannot narrow a listing of {status} jobs: no index holds them by queue; "
    "list them without it, or by type"
)


def sort_key(job: Job, order: ListOrder) -> datetime:
    moment: datetime | None = getattr(job, order.column.value)
    if moment is None:
        # Only locked_until can be NULL, and never on a processing job (the schema's
        # lease_while_processing check), the only status ordered by it.
        raise ValueError(f"job {job.id} has no {order.column.value} to be listed by")
    return moment


# A group's value: a queue name or a priority.
GroupValue = str | int


def position_of(job: Job) -> ListPosition:
    """Where a listing of `job`'s status stands once it has listed `job`."""
    order = TRAITS[job.status].order
    groups = tuple(getattr(job, name) for name in order.groups)
    return ListPosition(sort_key(job, order), job.id, groups)


@dataclass(frozen=True, slots=True)
class ListPosition:
    """Where a page ended: the last job's group values (its order's `groups`), sort key
    and id. The next page starts after it."""

    key: datetime
    job_id: UUID
    groups: tuple[GroupValue, ...] = ()

    @property
    def ordered(self) -> tuple[GroupValue | datetime | UUID, ...]:
        """The position as the listing orders it: groups, then key, then id."""
        return (*self.groups, self.key, self.job_id)


@dataclass(frozen=True, slots=True)
class JobQuery:
    """Jobs of `status` (and of `type`, and in `queue`, if given), at most `limit`, after
    `after`.

    `status` is required, `type` narrows any status and `queue` only those whose traits
    allow it: every listing reads its status's index, never the whole table.
    """

    status: Status
    type: str | None = None
    limit: int = DEFAULT_LIST_LIMIT
    after: ListPosition | None = None
    queue: str | None = None

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
        if self.queue is not None:
            check_queue_name(self.queue)
            if not TRAITS[self.status].by_queue:
                raise ValueError(NOT_BY_QUEUE.format(status=self.status.value))

    @property
    def order(self) -> ListOrder:
        return TRAITS[self.status].order


@dataclass(frozen=True, slots=True)
class JobPage:
    jobs: tuple[Job, ...]
    # Where the next page starts; None when this page holds the last matching job.
    next: ListPosition | None
