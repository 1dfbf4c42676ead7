"""A listing's query as the statement that reads it and its values, and the rows read as
a page: the store's `list_jobs` and `find_by_key`, kept out of the store's module."""

from __future__ import annotations

from collections.abc import Sequence

from jobqueue.adapters.postgres.queries.listing import (
    FIND_BY_IDEMPOTENCY_KEY,
    FIND_BY_UNIQUE_KEY,
    list_page,
)
from jobqueue.adapters.postgres.rows import Row, job_from_row
from jobqueue.adapters.postgres.statement import Statement
from jobqueue.domain.listing import JobPage, JobQuery, KeyKind, KeyLookup, page_of


def page_statement(query: JobQuery) -> tuple[Statement, dict[str, object]]:
    """The statement reading `query`'s page, and its values."""
    position = query.after if query.after is not None else query.before
    search = query.search
    statement = list_page(
        query.status,
        by_type=query.type is not None,
        by_queue=query.queue is not None,
        after=position is not None,
        backward=query.before is not None,
        finished=(query.finished_from is not None, query.finished_until is not None),
        search=frozenset() if search is None else search.filters,
    )
    # One row more than the page: whether it exists says if there is a next page.
    values: dict[str, object] = {
        "limit": query.limit + 1,
        "type": query.type,
        "queue": query.queue,
        "finished_from": query.finished_from,
        "finished_until": query.finished_until,
    }
    if position is not None:
        values |= {"after_key": position.key, "after_id": position.job_id}
        values |= {
            f"after_{group}": value
            for group, value in zip(query.order.groups, position.groups, strict=True)
        }
    if search is not None:
        values |= {
            "budget": search.budget,
            "error": search.error,
            "created_from": search.created_from,
            "created_until": search.created_until,
            "search_queue": search.queue,
            "search_type": search.type,
        }
    return statement, values


def page_from_rows(query: JobQuery, rows: Sequence[Row]) -> JobPage:
    """The page `rows` (read by `page_statement(query)`, in reading order) make.

    A search's rows end with the last row it read when its budget ran out (`scan_end`):
    where the next page carries on if this one did not fill."""
    if query.search is None:
        return page_of(query, [job_from_row(row) for row in rows])
    listed = [job_from_row(row) for row in rows if not row["scan_end"]]
    ends = [row for row in rows if row["scan_end"]]
    if not ends:
        return page_of(query, listed)
    return page_of(query, listed, job_from_row(ends[0]), int(ends[0]["scanned_rows"]))


def key_statement(lookup: KeyLookup) -> Statement:
    if lookup.kind is KeyKind.IDEMPOTENCY:
        return FIND_BY_IDEMPOTENCY_KEY
    return FIND_BY_UNIQUE_KEY
