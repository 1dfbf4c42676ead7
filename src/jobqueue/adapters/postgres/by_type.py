"""Reading finished jobs across types from `ix_jobs_finished_by_type (status, type,
updated_at)`: the types found by a loose index scan, then one range per type.

PostgreSQL 15 cannot skip from one type's range to the next by itself: a scan by
`status` and `updated_at` alone would read every entry of the status, the retained
ones included. So the types are found first, one index descent each (`WITH RECURSIVE`:
the first type, then the least type after the previous one), and each type's range is
read in a `LATERAL` subquery bounded by the caller's condition and limit. A status
holds a handful to a few hundred types, so this costs that many descents: far less
than the rows a retention batch deletes or a page lists.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Select, select, true

from jobqueue.adapters.postgres.schema import jobs, status_literal
from jobqueue.domain.status import Status


def types_of(status: Status, name: str) -> Any:
    """A recursive CTE `name` of every type among `status`'s jobs, in type order, ended by
    one NULL row (filter it with `present`)."""
    of_status = jobs.c.status == status_literal(status)
    first = select(jobs.c.type.label("type")).where(of_status).order_by(jobs.c.type).limit(1)
    found = first.cte(name, recursive=True)
    following = (
        select(jobs.c.type)
        .where(of_status, jobs.c.type > found.c.type)
        .order_by(jobs.c.type)
        .limit(1)
        .scalar_subquery()
    )
    return found.union_all(select(following.label("type")).where(found.c.type.is_not(None)))


def present(types: Any) -> ColumnElement[bool]:
    found: ColumnElement[bool] = types.c.type.is_not(None)
    return found


def per_type(types: Any, ranged: Select[Any], limit: int | ColumnElement[int]) -> Select[Any]:
    """`ranged` (a select over `jobs`, narrowed to its status and ordered as the index
    reads one type) run for each of `types`, joined LATERAL; the caller orders and limits
    the merge. `limit` bounds each type's range: no type gives more than the merge keeps."""
    each = ranged.where(jobs.c.type == types.c.type).limit(limit).lateral("each_type")
    return select(each).select_from(types.join(each, true())).where(present(types))
