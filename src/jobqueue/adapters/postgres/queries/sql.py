"""Pieces of SQL the statements share, each written once: status lists, the attempt log's
append, a page's columns, a progress report's stamp, the loose scan of a status's job
types, a claim's scan of its ranges.

Statuses are written into the SQL as literals, never bound: a partial index (`WHERE
status = 'pending'`) serves a statement only when its predicate visibly implies the
index's, and the generic plan of a prepared statement cannot see through `status = $1`.
A status is a constant of ours, so it needs no escaping.
"""

from __future__ import annotations

from collections.abc import Iterable

from jobqueue.adapters.postgres.schema import jobs
from jobqueue.domain.attempts import LOGGED_ATTEMPTS
from jobqueue.domain.status import Status


def quoted(constant: Status | str) -> str:
    """A status, or another constant of ours (a channel, an outcome), as an SQL literal."""
    escaped = str(constant).replace("'", "''")
    return f"'{escaped}'"


def among(statuses: Iterable[Status]) -> str:
    """`IN (…)`'s list of `statuses`, in a stable order."""
    return ", ".join(quoted(status) for status in sorted(statuses))


def narrowed(*, by_queue: bool, by_type: bool) -> str:
    """The conditions a bulk selection adds to its status: `:queue`'s and `:type`'s jobs
    only, when given."""
    return "".join(
        [" AND queue = :queue" if by_queue else "", " AND type = :type" if by_type else ""]
    )


def record(table: str = "jobs", *, result: bool = True) -> str:
    """The columns of a job's record from `table`'s rows (`jobs`, or a subquery of its
    rows). Its `waiting_for` is how many of its dependencies are still live, while it
    waits: `job_waits` counts them (migrations 0025 and 0026: its own count, or the one
    it shares), the row keeps the count it began with. Without `result`, read as NULL."""

    def read(column: str) -> str:
        if column == "result" and not result:
            return "CAST(NULL AS jsonb) AS result"
        if column == "waiting_for":
            return (
                f"CASE WHEN {table}.status = {quoted(Status.WAITING)} THEN coalesce(("
                "SELECT job_waits.remaining FROM job_waits"
                f" WHERE job_waits.job_id = coalesce({table}.wait_id, {table}.id)"
                f"), {table}.waiting_for) ELSE 0 END AS waiting_for"
            )
        return f"{table}.{column}"

    return ", ".join(read(column.name) for column in jobs.columns)


def listed(table: str = "jobs") -> str:
    """The columns of `table`'s rows a page of jobs reads: its `record` but `result`. A
    result may be large (up to RESULT_MAX_BYTES), and a page of completed jobs would carry
    a hundred of them; a job's record (`GET_JOB`) has it."""
    return record(table, result=False)


def stamped(progress: str) -> str:
    """A progress report (`progress`, JSON text, an SQL expression) as the row keeps it:
    with the store's time, `at` (`rows.py` reads it)."""
    return f"CAST({progress} AS jsonb) || jsonb_build_object('at', now())"


def appended_attempt(outcome: str, error: str, finished_at: str) -> str:
    """The row's `attempt_log` with its current attempt (`attempts`, `started_at`, `worker`)
    appended as ended in `outcome` at `finished_at` (each an SQL expression), the oldest
    entry dropped past `LOGGED_ATTEMPTS` (one at a time: each statement appends one).
    `domain/attempts.py` says which endings are logged; `rows.py` reads the entries."""
    return f"""(
        SELECT CASE WHEN jsonb_array_length(log) > {LOGGED_ATTEMPTS} THEN log - 0 ELSE log END
        FROM (
            SELECT coalesce(jobs.attempt_log, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
                'attempt', jobs.attempts,
                'outcome', {outcome},
                'error', {error},
                'started_at', jobs.started_at,
                'finished_at', {finished_at},
                'worker', jobs.worker
            )) AS log
        ) AS appended
    )"""


def types_of(status: Status, name: str) -> str:
    """A recursive CTE `name (type)` of every type among `status`'s jobs, in type order,
    ended by one NULL row (filter it out with `{name}.type IS NOT NULL`).

    PostgreSQL 15 cannot skip from one type's range of an index led by (status, type) to
    the next by itself: a scan by status and time alone would read every entry of the
    status. So the types are found first, one index descent each (the first type, then the
    least type after the previous one), and each type's range is then read on its own,
    bounded by the caller's condition and limit. A status holds a handful to a few hundred
    types, so this costs that many descents: far less than the rows a page or a retention
    batch reads."""
    return f"""{name} (type) AS (
        (SELECT type FROM jobs WHERE status = {quoted(status)} ORDER BY type LIMIT 1)
        UNION ALL
        SELECT (
            SELECT type FROM jobs
            WHERE status = {quoted(status)} AND type > {name}.type
            ORDER BY type LIMIT 1
        )
        FROM {name}
        WHERE {name}.type IS NOT NULL
    )"""


def in_ranges(columns: str, after: str, limit: str, lock: str = "") -> str:
    """The FROM clause of a claim's scan of one queue's due jobs (`ranges.position`,
    `picked.<columns>`): for each (priority, type) range it is given in turn
    (`:priorities`, `:types`; `domain/claims.py`), after the key that range's scan starts
    after (`:<after>_run_ats`, `:<after>_ids`), at most `limit`, in due order, a LATERAL
    scan of that range of ix_jobs_due_by_type, in which `run_at <= now()` bounds the range,
    so jobs scheduled later are never read, nor the jobs of other types; `lock`, when
    given, locks each row as it is read."""
    return f"""
    FROM unnest(
        CAST(:priorities AS smallint[]),
        CAST(:types AS text[]),
        CAST(:{after}_run_ats AS timestamptz[]),
        CAST(:{after}_ids AS uuid[])
    ) WITH ORDINALITY AS ranges (priority, type, after_run_at, after_id, position)
    JOIN LATERAL (
        SELECT {columns} FROM jobs
        WHERE status = 'pending'
          AND queue = :queue
          AND priority = ranges.priority
          AND type = ranges.type
          AND run_at <= now()
          AND (run_at, id) > (ranges.after_run_at, ranges.after_id)
        ORDER BY run_at, id
        LIMIT {limit}
        {lock}
    ) AS picked ON true
    """
