"""Reading many jobs of `jobs`: a page of a listing, the counts per queue and per status,
a bulk selection's bounded count, and retention's delete of old finished jobs. Each
reads its status's partial index, in that index's order, never the whole table
(`domain/status.py` says which index holds which status, and in which order)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from jobqueue.adapters.postgres.queries.sql import listed, quoted, types_of
from jobqueue.adapters.postgres.statement import Statement
from jobqueue.domain.bulk import index_prefix
from jobqueue.domain.status import COUNTED, TRAITS, Status


@cache
def list_page(
    status: Status,
    *,
    by_type: bool,
    by_queue: bool,
    after: bool,
    backward: bool = False,
    finished: tuple[bool, bool] = (False, False),
    search: frozenset[str] = frozenset(),
) -> Statement:
    """One page of `status`'s jobs: of `:type`, in `:queue`, after the position `:after_*`
    (its group values, its sort key, its id) when asked, `:limit` rows at most; read
    `backward` (the page before the position, last row first), finished from
    `:finished_from` and until `:finished_until` when asked.

    One row more than the page is asked for by the caller: whether it exists says if
    there is a next page. A `search` (the names of `Search.filters`) reads at most
    `:budget` rows of that range and keeps those matching (`_searched`)."""
    traits = TRAITS[status]
    order = traits.order
    column = order.column.value
    # The direction the index is read in: a page backward reads it the other way.
    descending = order.descending != backward
    conditions = [f"status = {quoted(status)}"]
    if by_type:
        conditions.append("type = :type")
    if by_queue:
        # For pending jobs the index's first column: the listing is that queue's range.
        conditions.append("queue = :queue")
    if after and order.groups:
        # A row comparison over the index's own columns, in its order: the index seeks
        # to it (grouped orders are ascending, and read backward descending).
        keys = ", ".join([*order.groups, column, "id"])
        position = ", ".join([*(f":after_{group}" for group in order.groups), ":after_key"])
        conditions.append(f"({keys}) {'<' if descending else '>'} ({position}, :after_id)")
    elif after:
        # Spelled out rather than as a row comparison: the bound on the sort column alone
        # is what the index can seek to; the id only settles ties at the boundary.
        before, strictly = ("<=", "<") if descending else (">=", ">")
        conditions += [
            f"{column} {before} :after_key",
            f"({column} {strictly} :after_key OR id {strictly} :after_id)",
        ]
    # A range of the index's own column (finished statuses' updated_at).
    if finished[0]:
        conditions.append(f"{column} >= :finished_from")
    if finished[1]:
        conditions.append(f"{column} < :finished_until")
    columns = (*order.groups, column, "id")
    ordering = _ordering(columns, descending=descending)
    where = "\n          AND ".join(conditions)
    merged = traits.typed_index and not by_type
    if search:
        return _searched(status, where, columns, search, merged=merged, descending=descending)
    if not merged:
        return Statement(
            f"list_{status}",
            f"""
            SELECT {listed()} FROM jobs
            WHERE {where}
            ORDER BY {ordering}
            LIMIT :limit
            """,
        )
    # Every type of a status indexed by type: the page of each type's range, merged.
    return Statement(
        f"list_{status}",
        f"""
        WITH RECURSIVE {types_of(status, "listed_types")}
        SELECT each_type.* FROM listed_types
        JOIN LATERAL (
            SELECT {listed()} FROM jobs
            WHERE {where}
              AND type = listed_types.type
            ORDER BY {ordering}
            LIMIT :limit
        ) AS each_type ON true
        WHERE listed_types.type IS NOT NULL
        ORDER BY {_ordering([column, "id"], descending=descending, table="each_type")}
        LIMIT :limit
        """,
    )


@cache
def count_selected(status: Status, *, by_queue: bool, by_type: bool) -> Statement:
    """How many jobs of `status` (in `:queue`, of `:type`) a bulk call would select, among
    the first `:budget` of the status's index range: what the dashboard shows before an
    operator confirms, with how many jobs were read (`read` below `:budget`: all were).

    The fields the index leads with narrow the range (`bulk.index_prefix`); the others
    are counted among the rows read. Read in the index's own order, so that the scan is
    that range and stops at the budget; unordered, the planner may read the table
    instead when the status is a large part of it."""
    traits = TRAITS[status]
    leading = ["type"] if traits.typed_index else []
    keys = ", ".join([*leading, *traits.order.groups, traits.order.column.value])
    prefix = index_prefix(status)
    given = {"queue": by_queue, "type": by_type}
    ranged = [f" AND {field} = :{field}" for field, on in given.items() if on and field in prefix]
    filtered = [f"{field} = :{field}" for field, on in given.items() if on and field not in prefix]
    matching = " AND ".join(filtered) or "true"
    return Statement(
        f"count_selected_{status}",
        f"""
        SELECT count(*) FILTER (WHERE {matching}) AS selected, count(*) AS read FROM (
            SELECT queue, type FROM jobs
            WHERE status = {quoted(status)}{"".join(ranged)}
            ORDER BY {keys}
            LIMIT :budget
        ) AS ranged
        """,
    )


def _ordering(columns: Sequence[str], *, descending: bool, table: str = "") -> str:
    """`ORDER BY`'s list: `columns` (of `table`), all one way."""
    prefix = f"{table}." if table else ""
    direction = " DESC" if descending else ""
    return ", ".join(f"{prefix}{name}{direction}" for name in columns)


# What each of `Search`'s filters keeps. strpos, not LIKE: the text is data, and its % and
# _ mean nothing.
_SEARCH_FILTERS = {
    "error": "strpos(lower(last_error), lower(:error)) > 0",
    "created_from": "created_at >= :created_from",
    "created_until": "created_at < :created_until",
    "queue": "queue = :search_queue",
    "type": "type = :search_type",
}
# The columns `_SEARCH_FILTERS` read.
_SEARCHED_COLUMNS = ("last_error", "created_at", "queue", "type")


def _searched(
    status: Status,
    where: str,
    columns: Sequence[str],
    search: frozenset[str],
    *,
    merged: bool,
    descending: bool,
) -> Statement:
    """A page of the rows matching `search` among the first `:budget` of the range `where`
    (`scanned`), and the last row read (`scan_end`, with how many were read) when the
    budget ran out: where the next page carries on.

    Every type's range merged (`merged`): each type's range is read for an equal share of
    the budget, and only as far as every type's was read in full counts as read (`cut`:
    the first, in the reading's order, of the last rows of the types whose share ran
    out). A type with more jobs than its share then stops the search early, never the
    budget being overrun."""
    filters = " AND ".join(_SEARCH_FILTERS[name] for name in sorted(search))
    ordering = _ordering(columns, descending=descending)
    # Merged ranges are finished statuses', ordered by (updated_at, id) alone.
    column = columns[-2]
    # What the scan keeps of each row: its place in the order and what the filters read.
    # The rows shown are read again by id: a whole row (its payload) of every row read
    # would cost more than the few lookups.
    kept = ", ".join(dict.fromkeys([*columns, *_SEARCHED_COLUMNS]))
    if not merged:
        scanned = f"""scanned AS MATERIALIZED (
            SELECT {kept} FROM jobs
            WHERE {where}
            ORDER BY {ordering}
            LIMIT :budget
        )"""
        ran_out = "(SELECT count(*) FROM scanned) >= :budget"
    else:
        reached = ">=" if descending else "<="
        scanned = f"""{types_of(status, "listed_types")},
        share (rows) AS (
            SELECT greatest(:budget / greatest(count(*), 1), 1) FROM listed_types
            WHERE type IS NOT NULL
        ),
        per_type AS MATERIALIZED (
            SELECT each_type.* FROM listed_types
            JOIN LATERAL (
                SELECT {kept} FROM jobs
                WHERE {where}
                  AND type = listed_types.type
                ORDER BY {ordering}
                LIMIT (SELECT rows FROM share)
            ) AS each_type ON true
            WHERE listed_types.type IS NOT NULL
        ),
        type_ends AS (
            SELECT DISTINCT ON (type) {column}, id,
                count(*) OVER (PARTITION BY type) AS rows
            FROM per_type
            ORDER BY type, {_ordering([column, "id"], descending=not descending)}
        ),
        cut AS MATERIALIZED (
            SELECT {column}, id FROM type_ends
            WHERE rows >= (SELECT rows FROM share)
            ORDER BY {_ordering([column, "id"], descending=descending)}
            LIMIT 1
        ),
        scanned AS (
            -- The cut's values as scalars: computed once, not once a row.
            SELECT * FROM per_type
            WHERE NOT EXISTS (SELECT FROM cut)
               OR ({column}, id) {reached} ((SELECT {column} FROM cut), (SELECT id FROM cut))
        )"""
        ran_out = "EXISTS (SELECT FROM cut)"
    return Statement(
        f"search_{status}",
        f"""
        WITH RECURSIVE {scanned}
        SELECT {listed()}, picked.scan_end, picked.scanned_rows
        FROM (
            SELECT matched.id, false AS scan_end, CAST(NULL AS bigint) AS scanned_rows
            FROM (
                SELECT id FROM scanned WHERE {filters} ORDER BY {ordering} LIMIT :limit
            ) AS matched
            UNION ALL
            SELECT last_read.id, true, (SELECT count(*) FROM scanned)
            FROM (
                SELECT id FROM scanned
                ORDER BY {_ordering(columns, descending=not descending)}
                LIMIT 1
            ) AS last_read
            WHERE {ran_out}
        ) AS picked
        JOIN jobs ON jobs.id = picked.id
        ORDER BY picked.scan_end, {_ordering(columns, descending=descending, table="jobs")}
        """,
    )


# The job holding a key, by the key's unique index (`domain/listing.py`'s `KeyLookup`).
FIND_BY_IDEMPOTENCY_KEY = Statement(
    "find_by_idempotency_key", "SELECT * FROM jobs WHERE idempotency_key = :key"
)
FIND_BY_UNIQUE_KEY = Statement(
    "find_by_unique_key",
    "SELECT * FROM jobs WHERE unique_key = :key AND status = ANY(unique_states)",
)


def _per_queue(status: Status, *, one_queue: bool = False) -> str:
    only = " AND queue = :queue" if one_queue else ""
    return f"""
        SELECT queue, {quoted(status)} AS status,
            count(*) AS jobs,
            count(*) FILTER (WHERE run_at <= now()) AS due,
            now() - min(run_at) FILTER (WHERE run_at <= now()) AS oldest_due_age
        FROM jobs
        WHERE status = {quoted(status)}{only}
        GROUP BY queue
    """


# Jobs per queue and counted status (live and held), with how many pending ones are due
# and for how long the oldest has been: one aggregate per status, each over that
# status's partial index (the pending one is ordered by queue already).
COUNT_BY_QUEUE = Statement(
    "count_by_queue", " UNION ALL ".join(_per_queue(status) for status in COUNTED)
)

# The same for one queue (`:queue`), for its own page: the pending index leads with the
# queue, so its pending jobs are one range of it; the other counted statuses are few.
COUNT_IN_QUEUE = Statement(
    "count_in_queue",
    " UNION ALL ".join(_per_queue(status, one_queue=True) for status in COUNTED),
)

# Jobs per counted status, for the queue-depth gauge: each a count of its status's small
# partial index.
COUNT_BY_STATUS = Statement(
    "count_by_status",
    "SELECT "
    + ",\n    ".join(
        f"(SELECT count(*) FROM jobs WHERE status = {quoted(status)}) AS {status}"
        for status in COUNTED
    ),
)


@cache
def prune(statuses: Sequence[Status]) -> Statement:
    """Delete at most `:limit` finished jobs of `statuses` older than their `:age_<status>`,
    the oldest first.

    One locking scan per status, so that a status kept long never slows the pruning of
    another: type by type (`types_of`), each type's oldest first, at most `:limit` in all;
    the outer LIMIT keeps the oldest of the statuses' batches. Within a status the batch
    is the oldest of each type in turn, not the oldest of all: what retention needs is
    only that every batch is old enough and bounded. SKIP LOCKED: processes pruning at
    once take different rows; a finished row is never updated, so nothing but another
    pruner (or an operator) holds its lock. `= ANY(ARRAY(…))`, not `IN (…)`: the ids are
    collected first and looked up in the primary key; joined as a subquery, a batch of a
    thousand can tip the planner into hashing it and scanning the whole table."""
    scans = []
    for status in statuses:
        types = f"types_{status}"
        scans.append(types_of(status, types))
        scans.append(f"""aged_{status} AS MATERIALIZED (
            SELECT aged.id, aged.updated_at FROM {types}
            JOIN LATERAL (
                SELECT id, updated_at FROM jobs
                WHERE status = {quoted(status)}
                  AND type = {types}.type
                  AND updated_at < now() - CAST(:age_{status} AS interval)
                ORDER BY updated_at
                LIMIT :limit
                FOR UPDATE SKIP LOCKED
            ) AS aged ON true
            WHERE {types}.type IS NOT NULL
            LIMIT :limit
        )""")
    candidates = " UNION ALL ".join(
        f"SELECT id, updated_at FROM aged_{status}" for status in statuses
    )
    each_status = ",\n        ".join(scans)
    return Statement(
        "prune_finished",
        f"""
        WITH RECURSIVE {each_status}
        DELETE FROM jobs
        WHERE id = ANY(ARRAY(
            SELECT id FROM ({candidates}) AS candidates
            ORDER BY updated_at
            LIMIT :limit
        ))
        RETURNING id
        """,
    )
