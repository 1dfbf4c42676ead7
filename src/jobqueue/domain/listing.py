"""Listing jobs of one status, a page at a time, in an order the store can keep cheaply.

Each status is listed in the order of the index that holds it, ties broken by id, so a
page is one contiguous range of that index and the next page starts where it ended
(keyset pagination): no page ever counts or skips the rows before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from enum import StrEnum
from uuid import UUID

from jobqueue.domain.fields import MAX_TYPE_LENGTH, check_queue_name
from jobqueue.domain.job import Job
from jobqueue.domain.status import TRAITS, ListOrder, SortColumn, Status

MIN_LIST_LIMIT = 1
MAX_LIST_LIMIT = 500
DEFAULT_LIST_LIMIT = 50

NOT_BY_QUEUE = (
    "queue cannot narrow a listing of {status} jobs: no index holds them by queue; "
    "list them without it, or by type"
)
NOT_FINISHED = "{status} jobs have not finished: a finished-time range lists finished jobs only"

# The most rows a search (`Search`) reads of its listing's index range for one page.
SEARCH_BUDGET = 10_000
MAX_SEARCH_TEXT = 200


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
class Search:
    """What no index holds a listing by: the listing reads at most `budget` rows of its
    index range, in its order, and keeps those matching. A page that the budget ended
    before it filled says how far the search got (`JobPage.searched`), and the next page
    carries on from there, so no page reads more than `budget` rows however rare the
    matches are.

    `error`: text within the job's last error, ignoring case; `created_*`: when it was
    submitted (from inclusive, until exclusive); `queue` and `type`: where the status's
    index is not a range of them (`bounded_query`)."""

    error: str | None = None
    created_from: datetime | None = None
    created_until: datetime | None = None
    queue: str | None = None
    budget: int = SEARCH_BUDGET
    type: str | None = None

    def __post_init__(self) -> None:
        if self.error is not None and not 1 <= len(self.error) <= MAX_SEARCH_TEXT:
            raise ValueError(f"error text must be 1 to {MAX_SEARCH_TEXT} characters")
        if self.queue is not None:
            check_queue_name(self.queue)
        if self.type is not None and not 1 <= len(self.type) <= MAX_TYPE_LENGTH:
            raise ValueError(f"a searched type must be 1 to {MAX_TYPE_LENGTH} characters")
        if not 1 <= self.budget <= SEARCH_BUDGET:
            raise ValueError(f"a search budget must be 1 to {SEARCH_BUDGET} rows")
        _check_range("created", self.created_from, self.created_until)

    @property
    def filters(self) -> frozenset[str]:
        """The names of the filters given: the shape of the statement that applies them."""
        return frozenset(
            each.name
            for each in fields(self)
            if each.name != "budget" and getattr(self, each.name) is not None
        )

    def matches(self, job: Job) -> bool:
        if (
            self.error is not None
            and self.error.casefold() not in (job.last_error or "").casefold()
        ):
            return False
        if self.created_from is not None and job.created_at < self.created_from:
            return False
        if self.created_until is not None and job.created_at >= self.created_until:
            return False
        return self.queue in (None, job.queue) and self.type in (None, job.type)


@dataclass(frozen=True, slots=True)
class JobQuery:
    """Jobs of `status` (and of `type`, and in `queue`, if given), at most `limit`, after
    `after` (or the page that ends just before `before`), in its status's order.

    `status` is required, `type` narrows any status and `queue` only those whose traits
    allow it: every listing reads its status's index, never the whole table. A finished
    status's jobs may be narrowed to a range of when they finished (`finished_from`
    inclusive, `finished_until` exclusive): its index's own column, so a range of it.
    Anything else narrows by a bounded `search`.
    """

    status: Status
    type: str | None = None
    limit: int = DEFAULT_LIST_LIMIT
    after: ListPosition | None = None
    queue: str | None = None
    before: ListPosition | None = None
    finished_from: datetime | None = None
    finished_until: datetime | None = None
    search: Search | None = None

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
        if self.after is not None and self.before is not None:
            raise ValueError("a page starts after one position or ends before one, not both")
        if (self.finished_from, self.finished_until) != (None, None):
            if self.order.column is not SortColumn.UPDATED_AT:
                raise ValueError(NOT_FINISHED.format(status=self.status.value))
            _check_range("finished", self.finished_from, self.finished_until)

    @property
    def order(self) -> ListOrder:
        return TRAITS[self.status].order

    def in_range(self, job: Job) -> bool:
        """Whether `job` is in the index range this query reads (all it asks but its
        search), wherever it stands in the order."""
        if job.status is not self.status or self.type not in (None, job.type):
            return False
        if self.queue not in (None, job.queue):
            return False
        if self.finished_from is not None and job.updated_at < self.finished_from:
            return False
        return self.finished_until is None or job.updated_at < self.finished_until


@dataclass(frozen=True, slots=True)
class JobPage:
    jobs: tuple[Job, ...]
    # Where the next page starts; None when this page holds the last matching job.
    next: ListPosition | None
    # Where the page before it ends (a page asked for `before` a position): None when
    # nothing comes before this page.
    previous: ListPosition | None = None
    # How many rows a search read before its budget ended the page (it may hold fewer
    # jobs than asked); `next` (or `previous`, going back) is then where it stopped.
    # None when the page was not cut short.
    searched: int | None = None


def bounded_query(
    status: Status,
    *,
    type: str | None = None,
    queue: str | None = None,
    limit: int = DEFAULT_LIST_LIMIT,
    after: ListPosition | None = None,
    before: ListPosition | None = None,
    finished_from: datetime | None = None,
    finished_until: datetime | None = None,
    error: str | None = None,
    created_from: datetime | None = None,
    created_until: datetime | None = None,
) -> JobQuery:
    """The query for these filters that reads a bounded number of rows, however many
    jobs the table holds: each filter narrows the range of the status's index read where
    the index holds it as a range (a type of finished jobs, the queue of pending ones,
    a finished range), and is otherwise searched for within the budget (`Search`).

    Read as a filter on the index instead, a type or queue few jobs have would read every
    job of the status looking for them: all pending jobs of a queue for one type, every
    dead letter for one queue."""
    traits = TRAITS[status]
    by_type = traits.typed_index
    by_queue = traits.order.groups[:1] == ("queue",)
    search = Search(
        error,
        created_from,
        created_until,
        queue=None if by_queue else queue,
        type=None if by_type else type,
    )
    return JobQuery(
        status,
        type if by_type else None,
        limit,
        after,
        queue if by_queue else None,
        before=before,
        finished_from=finished_from,
        finished_until=finished_until,
        search=search if search.filters else None,
    )


def page_of(
    query: JobQuery,
    listed: Sequence[Job],
    stop: Job | None = None,
    searched: int | None = None,
) -> JobPage:
    """The page `query` asked for, from what the store `listed` for it (one job more than
    the page at most, in the order it read them: backward for a page `before` a
    position) and, for a search whose budget ran out after `searched` rows, the last job
    it read (`stop`): where the search carries on when the page did not fill."""
    page = list(listed[: query.limit])
    beyond = position_of(page[-1]) if len(listed) > query.limit else None
    cut_short = None
    if beyond is None and stop is not None:
        beyond, cut_short = position_of(stop), searched
    if query.before is None:
        previous = position_of(page[0]) if page and query.after is not None else None
        return JobPage(tuple(page), beyond, previous=previous, searched=cut_short)
    # Read backward, from the position towards the start: shown in the listing's order.
    page.reverse()
    following = position_of(page[-1]) if page else None
    return JobPage(tuple(page), following, previous=beyond, searched=cut_short)


def _check_range(name: str, start: datetime | None, end: datetime | None) -> None:
    for moment in (start, end):
        if moment is not None and moment.tzinfo is None:
            raise ValueError(f"a {name} time must carry its time zone")
    if start is not None and end is not None and start >= end:
        raise ValueError(f"the {name} range is empty: its start must come before its end")


class KeyKind(StrEnum):
    IDEMPOTENCY = "idempotency_key"
    UNIQUE = "unique_key"


@dataclass(frozen=True, slots=True)
class KeyLookup:
    """The job holding a key, found by the key's unique index: at most one job.

    An idempotency key stays with its job for the job's life; a unique key (as stored,
    with its period's slot) is held only while the job is in one of the statuses the key
    counts in (`domain/unique.py`), and only such a job is found."""

    kind: KeyKind
    key: str

    def __post_init__(self) -> None:
        if not 1 <= len(self.key) <= 1000 or "\x00" in self.key:
            raise ValueError(f"a {self.kind.value.replace('_', ' ')} must be 1 to 1000 characters")
