"""The statements of a job's life on `jobs`: endings, lease renewals and recovery, and an
operator's retry, cancel, reschedule, delete and discard (claims are in `claims.py`).

Every transition is one compare-and-swap: `UPDATE … WHERE status = <from>` (and, for a
claimed job's writes, `AND lease_token = <the claim's token>`), applied atomically or to
no row. Which transitions exist is the domain's table (`domain/transitions.py`); a test
runs every statement against a job in every status and checks the two agree.
"""

from __future__ import annotations

from functools import cache

from jobqueue.adapters.postgres.notify import CHANNEL as JOBS_CHANNEL
from jobqueue.adapters.postgres.queries.sql import (
    among,
    appended_attempt,
    narrowed,
    quoted,
    record,
    stamped,
)
from jobqueue.adapters.postgres.statement import Statement
from jobqueue.domain.attempts import Outcome, holds_final_attempt
from jobqueue.domain.bulk import ACTIONABLE, CANCELLABLE
from jobqueue.domain.outcome import LEASE_EXPIRED_ERROR
from jobqueue.domain.status import LIVE, TRAITS, Status
from jobqueue.domain.transitions import DELETABLE

# Never built from anything a client sent; the payload is a job id.
CANCELS_CHANNEL = "jobqueue_cancels"

# --- ending attempts ---------------------------------------------------------------------

# Every ending of every attempt in a batch, whatever the mix of decisions: one row per
# ending from parallel arrays. Fenced by each row's own token and a live lease (a stale
# worker, its lease recovered and the job claimed again, matches no row and is simply
# not returned). `locked_until IS NOT NULL` is `status = 'processing'` by the table's
# CHECK, also when rechecked on a newer row version, but unlike it does not imply
# ix_jobs_lease_expiry's predicate, so the planner looks each id up in pk_jobs: read
# through the lease index instead, a batch cost 8-16 ms and ~2,900 buffers after a 60 s
# xmin hold had filled that index (0.14 ms and 60 buffers by key, measured).
#
# Due times come from the database clock, the one the claim compares with. An attempt
# the job outlives is logged (a retry: back to pending with the attempt kept); a release
# or a snooze gives the attempt back, and a final ending stays in the row's own columns.
# A completion writes what its handler returned; any ending writes the attempt's last
# progress report that the progress writer had not written yet.
ENDINGS = f"""
    UPDATE jobs
    SET status = ending.status,
        attempt_log = CASE
            WHEN ending.status = 'pending' AND ending.refund = 0
            THEN {appended_attempt(quoted(Outcome.RETRIED), "ending.error", "now()")}
            ELSE jobs.attempt_log
        END,
        last_error = coalesce(ending.error, jobs.last_error),
        run_at = CASE WHEN ending.delay IS NULL THEN jobs.run_at ELSE now() + ending.delay END,
        -- GREATEST only guards rows written by hand: a claim always counted one.
        attempts = greatest(jobs.attempts - ending.refund, 0),
        snoozes = jobs.snoozes + ending.snoozed,
        result = coalesce(CAST(ending.result AS jsonb), jobs.result),
        progress = CASE
            WHEN ending.progress IS NULL THEN jobs.progress
            ELSE {stamped("ending.progress")}
        END,
        locked_until = NULL,
        updated_at = now()
    FROM unnest(
        CAST(:ids AS uuid[]),
        CAST(:tokens AS bigint[]),
        CAST(:statuses AS text[]),
        CAST(:errors AS text[]),
        CAST(:delays AS interval[]),
        CAST(:refunds AS integer[]),
        CAST(:snoozed AS integer[]),
        CAST(:results AS text[]),
        CAST(:progress AS text[])
    ) AS ending (id, token, status, error, delay, refund, snoozed, result, progress)
    WHERE jobs.id = ending.id
      AND jobs.lease_token = ending.token
      AND jobs.locked_until IS NOT NULL
    RETURNING jobs.id, jobs.lease_token
"""

RECORD_ENDINGS = Statement("record_endings", ENDINGS)

# Every lease a process holds, renewed in one statement, fenced like an ending: a lease
# not returned is held no more (recovered, or superseded by a newer claim).
RENEW_LEASES = Statement(
    "renew_leases",
    """
    UPDATE jobs
    SET locked_until = now() + CAST(:lease AS interval)
    FROM unnest(CAST(:ids AS uuid[]), CAST(:tokens AS bigint[])) AS held (id, token)
    WHERE jobs.id = held.id
      AND jobs.lease_token = held.token
      AND jobs.locked_until IS NOT NULL
    RETURNING jobs.id, jobs.lease_token
    """,
)

# Running jobs' latest progress reports (`worker/progress.py`), fenced like a renewal: a
# report of an attempt whose lease is gone is dropped. `status` and no indexed column
# change, so the new row version can stay on its page (HOT) and no index grows.
RECORD_PROGRESS = Statement(
    "record_progress",
    f"""
    UPDATE jobs
    SET progress = {stamped("report.progress")}
    FROM unnest(
        CAST(:ids AS uuid[]), CAST(:tokens AS bigint[]), CAST(:progress AS text[])
    ) AS report (id, token, progress)
    WHERE jobs.id = report.id
      AND jobs.lease_token = report.token
      AND jobs.locked_until IS NOT NULL
    RETURNING jobs.id, jobs.lease_token
    """,
)

# Jobs whose lease ran out (their process died): back to pending, or dead-lettered on
# their last attempt. The lost attempt counts (it was counted at claim), so a job that
# kills its process every time still runs out of attempts. Back to pending, the job
# outlives the attempt: it is logged; a last one stays in the row, dead-lettered. SKIP
# LOCKED: a row locked right now is being written by its worker, which recovery must
# never make wait; it can take the row next round if need be.
_EXPIRED_ATTEMPT = appended_attempt(
    quoted(Outcome.LEASE_EXPIRED), quoted(LEASE_EXPIRED_ERROR), "now()"
)
RECOVER_EXPIRED = Statement(
    "recover_expired",
    f"""
    WITH expired AS MATERIALIZED (
        SELECT id FROM jobs
        WHERE status = 'processing' AND locked_until < now()
        ORDER BY locked_until
        LIMIT :limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE jobs
    SET status = CASE
            WHEN jobs.attempts >= jobs.max_attempts THEN 'dead_letter' ELSE 'pending'
        END,
        run_at = CASE WHEN jobs.attempts >= jobs.max_attempts THEN jobs.run_at ELSE now() END,
        attempt_log = CASE
            WHEN jobs.attempts >= jobs.max_attempts THEN jobs.attempt_log
            ELSE {_EXPIRED_ATTEMPT}
        END,
        locked_until = NULL,
        last_error = {quoted(LEASE_EXPIRED_ERROR)},
        updated_at = now()
    FROM expired
    WHERE jobs.id = expired.id
    RETURNING jobs.*
    """,
)

# --- reading one job ---------------------------------------------------------------------

GET_JOB = Statement("get_job", f"SELECT {record()} FROM jobs WHERE id = :id")

# Someone waits for the job's end: marked on the live row, so that the statement ending
# it (written after this one, or waiting for its lock) announces it (migration 0023's
# triggers, on ENDINGS_CHANNEL). A job that ended already is not marked: the waiter reads
# it. Marked once: a second waiter finds it marked and writes nothing.
#
# The mark locks the row until its commit, and a claim passes over a locked row (SKIP
# LOCKED): a job waited for as soon as it was submitted was often missed by the claim its
# submission woke, which then rested a whole POLL_INTERVAL (a third of such jobs, in the
# bench). So marking a pending job wakes the workers again, at the mark's commit.
ENDINGS_CHANNEL = "jobqueue_endings"
WATCH_JOB = Statement(
    "watch_job",
    f"""
    WITH marked AS (
        UPDATE jobs SET watched = true
        WHERE id = :id AND NOT watched AND status IN ({among(LIVE)})
        RETURNING status
    )
    SELECT pg_notify({quoted(JOBS_CHANNEL)}, '') FROM marked WHERE status = 'pending'
    """,
)

STATUS_OF = Statement("status_of", "SELECT status FROM jobs WHERE id = :id")

# --- an operator's retry ------------------------------------------------------------------

# Back to pending with a fresh budget. lease_token is left alone: it must keep growing so
# that claims from before the retry stay fenced although attempt numbers start over. The
# final attempt moves from the row's columns to the log: it ended when the row was last
# written. A cancelled job has logged its attempts already (`holds_final_attempt`).
_HOLDS_FINAL = among(status for status in ACTIONABLE if holds_final_attempt(status))


def retried(status: str = "'pending'") -> str:
    """The SET list of a retry, to `status` (SQL: pending, unless it waits)."""
    return f"""
    status = {status},
    attempt_log = CASE
        WHEN jobs.status IN ({_HOLDS_FINAL})
        THEN {appended_attempt("jobs.status", "jobs.last_error", "jobs.updated_at")}
        ELSE jobs.attempt_log
    END,
    attempts = 0,
    snoozes = 0,
    run_at = now(),
    updated_at = now()
"""


_RETRIED = retried()

RETRY_JOB = Statement(
    "retry_job",
    f"""
    UPDATE jobs SET {_RETRIED}
    WHERE id = :id AND status IN ({among(ACTIONABLE)})
    RETURNING *
    """,
)

# --- an operator's cancel -----------------------------------------------------------------


# A cancel is the write that ends the job, pending or running: `cancelled`, the lease
# cleared, in one compare-and-swap. A running attempt is thereby fenced out like a stale
# one, so nothing its handler does later is written over the cancellation, and its
# attempt is logged as cancelled (a pending job's previous attempt, if any, is logged
# already). The statement tells the process running the job, by NOTIFY on
# CANCELS_CHANNEL with the job's id, delivered at commit; a process that misses it finds
# out at its next lease renewal.
def cancelling(target: str, returned: str) -> str:
    """The cancel of the rows of `target` (a CTE of `id`, and `was`: each row's status read
    under its lock), returning `returned` of each, `was` and whether its process was told."""
    return f"""
    cancelled AS (
        UPDATE jobs
        SET status = 'cancelled',
            attempt_log = CASE
                WHEN {target}.was = 'processing'
                THEN {appended_attempt(quoted(Outcome.CANCELLED), "NULL::text", "now()")}
                ELSE jobs.attempt_log
            END,
            locked_until = NULL,
            updated_at = now()
        FROM {target}
        WHERE jobs.id = {target}.id
        RETURNING {returned}, {target}.was
    )
    SELECT cancelled.*,
        CASE WHEN cancelled.was = 'processing'
            THEN pg_notify({quoted(CANCELS_CHANNEL)}, cancelled.id::text)
        END AS announced
    FROM cancelled
    """


CANCEL_JOB = Statement(
    "cancel_job",
    f"""
    WITH target AS MATERIALIZED (
        SELECT id, status AS was FROM jobs
        WHERE id = :id AND status IN ({among(CANCELLABLE)})
        FOR UPDATE
    ),
    {cancelling("target", "jobs.*")}
    """,
)

# --- an operator's reschedule and delete ---------------------------------------------------

# A pending job due at `:run_at`, else `:delay` from now ("run now": a zero delay). A job
# made due behind a claim cursor is found at its next rescan (`claim_cursor.py`).
RESCHEDULE_JOB = Statement(
    "reschedule_job",
    """
    UPDATE jobs
    SET run_at = COALESCE(CAST(:run_at AS timestamptz), now() + CAST(:delay AS interval)),
        updated_at = now()
    WHERE id = :id AND status = 'pending'
    RETURNING *
    """,
)

DELETE_JOB = Statement(
    "delete_job",
    f"""
    DELETE FROM jobs
    WHERE id = :id AND status IN ({among(DELETABLE)})
    RETURNING *
    """,
)

# --- acting on many jobs at once ---------------------------------------------------------


@cache
def selected(status: Status, *, by_queue: bool, by_type: bool) -> str:
    """The ids of the first `:limit` jobs of `status` (in `:queue`, of `:type`), locked:
    the status's index read in its order (`TRAITS`, ascending: the oldest ended first,
    pending jobs as claims take them, running ones by lease end), narrowed as it goes.
    SKIP LOCKED: a concurrent bulk call takes others, and neither waits. A finished or
    held row is never written by a worker, so only another operator can hold it; a
    running one is skipped while its worker writes its ending."""
    order = TRAITS[status].order
    keys = ", ".join([*order.groups, order.column.value])
    return f"""
        SELECT id FROM jobs
        WHERE status = {quoted(status)}{narrowed(by_queue=by_queue, by_type=by_type)}
        ORDER BY {keys}
        LIMIT :limit
        FOR UPDATE SKIP LOCKED
    """


@cache
def retry_selected(status: Status, *, by_queue: bool, by_type: bool) -> Statement:
    return Statement(
        "retry_selected",
        f"""
        WITH picked AS MATERIALIZED ({selected(status, by_queue=by_queue, by_type=by_type)})
        UPDATE jobs SET {_RETRIED}
        FROM picked
        WHERE jobs.id = picked.id
        RETURNING jobs.id
        """,
    )


@cache
def cancel_selected(status: Status, *, by_queue: bool, by_type: bool) -> Statement:
    return Statement(
        "cancel_selected",
        f"""
        WITH target AS MATERIALIZED (
            SELECT id, {quoted(status)}::text AS was
            FROM ({selected(status, by_queue=by_queue, by_type=by_type)}) AS picked
        ),
        {cancelling("target", "jobs.id")}
        """,
    )


# `= ANY(ARRAY(…))`, as retention deletes: the ids are collected first, then looked up in
# the primary key.
@cache
def discard_selected(status: Status, *, by_queue: bool, by_type: bool) -> Statement:
    return Statement(
        "discard_selected",
        f"""
        DELETE FROM jobs
        WHERE id = ANY(ARRAY({selected(status, by_queue=by_queue, by_type=by_type)}))
        RETURNING id
        """,
    )
