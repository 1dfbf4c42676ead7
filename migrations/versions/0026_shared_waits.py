"""Counts shared: the jobs of a graph that wait for the same live dependencies wait on one
count in `job_waits`, of its own id, which each names in `jobs.wait_id`; a job waiting
alone keeps a count of its own id (`wait_id` NULL), as every job did in 0025.

Why: in 0025 each ending counted itself off every dependent. In a fan where each of a
layer's 100 jobs waits for all 100 of the layer before, a layer's endings read 10,000
edges and rewrote the next layer's 100 counts once per ending statement, each statement
holding all 100 until its commit, so a layer's endings queued behind each other (bench,
fan). The 100 now share one count and 100 edges: each ending rewrites one row.

The release reads a count's jobs through `ix_jobs_wait_id` (its waiting jobs only), or
the job of its own id; a shared count goes with the last of its jobs to stop waiting.

Safe on a live table: a nullable column without a default (a catalog change, its lock
tried 50 ms at a time), an index made concurrently and empty, and the two functions replaced
in place: no row has a `wait_id` until a graph written by this revision's code stores
one, and the new functions count the rows without one as 0025's did. Downgrading gives
each waiting job that shares a count a count and edges of its own, under the same brief
hold on writes as 0025's switch, restores 0025's functions (read from 0025's own file),
then drops the index and the column.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-06
"""

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out, not imported: a revision must keep meaning what it meant when written.
_LIVE = "('waiting', 'pending', 'processing')"

_INDEX = "ix_jobs_wait_id"
_INDEX_DEFINITION = "ON jobs (wait_id) WHERE status = 'waiting' AND wait_id IS NOT NULL"

# As 0025's, but a count shared by jobs (`wait_id`) goes with the last of them to stop
# waiting. A job made to wait again (a workflow's retry, which clears its `wait_id`)
# waits alone.
_TRACK = """
CREATE OR REPLACE FUNCTION jobqueue_track_waiting() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'DELETE' AND NEW.status = 'waiting' THEN
        INSERT INTO job_waits (job_id, remaining) VALUES (NEW.id, NEW.waiting_for)
        ON CONFLICT (job_id) DO UPDATE SET remaining = excluded.remaining;
    ELSIF OLD.wait_id IS NULL THEN
        DELETE FROM job_waits WHERE job_id = OLD.id;
    ELSE
        DELETE FROM job_waits
        WHERE job_id = OLD.wait_id
          AND NOT EXISTS (
              SELECT FROM jobs WHERE jobs.wait_id = OLD.wait_id AND jobs.status = 'waiting'
          );
    END IF;
    RETURN NULL;
END
$$
"""


def _released(joined: str) -> str:
    """The update of the jobs of `counting`'s counts that ran out or saw a failure, found
    by `joined`: pending (due now at the earliest), or cancelled, saying which dependency
    ended how, unless they run anyway."""
    cancelled = "counting.failed IS NOT NULL AND NOT jobs.run_anyway"
    return f"""
            UPDATE jobs
            SET waiting_for = 0,
                status = CASE WHEN {cancelled} THEN 'cancelled' ELSE 'pending' END,
                run_at = CASE
                    WHEN {cancelled} THEN jobs.run_at ELSE greatest(jobs.run_at, now())
                END,
                last_error = CASE
                    WHEN {cancelled}
                    THEN 'job ' || split_part(counting.failed, ' ', 1)
                        || ' it depends on ended ' || split_part(counting.failed, ' ', 2)
                    ELSE jobs.last_error
                END,
                updated_at = now()
            FROM counting
            WHERE {joined}
              AND jobs.status = 'waiting'
              AND (counting.remaining <= 0 OR ({cancelled}))
            RETURNING jobs.id, jobs.status, counting.job_id AS wait_id"""


# As 0025's up to the counting (a count's id is a job's, or a shared one's); then the
# jobs of each count that ran out or saw a failure are looked up, released or cancelled,
# and the counts with none of their jobs left waiting dropped.
_COUNT = f"""
CREATE OR REPLACE FUNCTION jobqueue_count_noted() RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    noted_ids uuid[];
    noted_statuses text[];
    due_ids uuid[];
    due_remaining integer[];
    due_failures text[];
    emptied uuid[];
    started integer;
BEGIN
    LOOP
        EXIT WHEN current_setting('jobqueue.ended') = '';
        PERFORM set_config('jobqueue.ended', '', true);
        -- Taken out as arrays: joined as the temporary table, unanalysed, the edges and
        -- the jobs were read whole; an array's unnest is planned as the few rows it is.
        WITH taken AS (DELETE FROM jobqueue_ended RETURNING id, status)
        SELECT array_agg(id), array_agg(status) INTO noted_ids, noted_statuses FROM taken;
        -- Each noted job's edges, and then each count, looked up by key in a nested loop
        -- (a lateral subquery, not flattened: `OFFSET 0`, `FOR UPDATE`), whatever the
        -- statistics say.
        WITH counted AS (
            SELECT edges.job_id, sum(noted.delta) AS delta, min(noted.failure) AS failed
            FROM (
                SELECT noted.id,
                    CASE WHEN noted.status IN {_LIVE} THEN 1 ELSE -1 END AS delta,
                    CASE
                        WHEN noted.status NOT IN {_LIVE} AND noted.status <> 'completed'
                        THEN noted.id::text || ' ' || noted.status
                    END AS failure
                FROM unnest(noted_ids, noted_statuses) AS noted (id, status)
                WHERE noted.status <> 'purged'
                OFFSET 0
            ) AS noted
            CROSS JOIN LATERAL (
                SELECT job_dependencies.job_id FROM job_dependencies
                WHERE job_dependencies.depends_on = noted.id
                OFFSET 0
            ) AS edges
            GROUP BY edges.job_id
        ),
        -- Locked in id order, so that concurrent endings of a fan-in's dependencies do
        -- not deadlock.
        locked AS MATERIALIZED (
            SELECT waits.job_id, counted.delta, counted.failed
            FROM (SELECT * FROM counted ORDER BY counted.job_id) AS counted
            CROSS JOIN LATERAL (
                SELECT job_waits.job_id FROM job_waits
                WHERE job_waits.job_id = counted.job_id
                FOR UPDATE
            ) AS waits
        ),
        counting AS (
            UPDATE job_waits
            SET remaining = job_waits.remaining + locked.delta
            FROM locked
            WHERE job_waits.job_id = locked.job_id
            RETURNING job_waits.job_id, job_waits.remaining, locked.failed
        ),
        -- The jobs waiting alone, on the count of their id, that ran out or saw a
        -- failure: released or cancelled, joined by primary key (as in 0025).
        alone AS (
            {_released("jobs.id = counting.job_id AND jobs.wait_id IS NULL")}
        )
        SELECT
            (SELECT array_agg(alone.wait_id) FROM alone),
            (SELECT count(*) FROM alone WHERE alone.status = 'pending'),
            array_agg(counting.job_id),
            array_agg(counting.remaining),
            array_agg(counting.failed)
        INTO emptied, started, due_ids, due_remaining, due_failures
        FROM counting
        WHERE (counting.remaining <= 0 OR counting.failed IS NOT NULL)
          AND counting.job_id NOT IN (SELECT alone.wait_id FROM alone);
        -- The rest may be shared: their jobs, by `ix_jobs_wait_id`, from the counts as
        -- an array (planned as the few rows it is). Joined to the counting itself, the
        -- index was read whole (50,000 entries, seen in the plan test); joined by either
        -- key (a union), every waiting job was read, looking the counts' jobs up for
        -- each (30 ms for 500 waiting).
        IF due_ids IS NOT NULL THEN
            WITH counting AS (
                SELECT * FROM unnest(due_ids, due_remaining, due_failures)
                    AS due (job_id, remaining, failed)
            ),
            shared AS (
                {_released("jobs.wait_id = counting.job_id")}
            )
            SELECT
                emptied || array_agg(DISTINCT shared.wait_id),
                started + count(*) FILTER (WHERE shared.status = 'pending')
            INTO emptied, started
            FROM shared;
        END IF;
        -- A count goes with its waiting, here rather than by the row trigger, which
        -- statements run by triggers do not fire: when it ran out (all its jobs were
        -- released), or when a failure left none of its jobs waiting.
        IF emptied IS NOT NULL THEN
            DELETE FROM job_waits
            WHERE job_waits.job_id = ANY(emptied)
              AND (
                  job_waits.remaining <= 0
                  OR NOT EXISTS (
                      SELECT FROM jobs
                      WHERE jobs.wait_id = job_waits.job_id AND jobs.status = 'waiting'
                  )
                  AND NOT EXISTS (
                      SELECT FROM jobs
                      WHERE jobs.id = job_waits.job_id AND jobs.status = 'waiting'
                  )
              );
        END IF;
        IF started > 0 THEN
            PERFORM pg_notify('jobqueue_jobs', '');
        END IF;
        -- A deleted job's edges go with it: only then are they written at all.
        IF 'deleted' = ANY(noted_statuses) OR 'purged' = ANY(noted_statuses) THEN
            DELETE FROM job_dependencies
            WHERE depends_on = ANY(ARRAY(
                SELECT noted.id FROM unnest(noted_ids, noted_statuses) AS noted (id, status)
                WHERE noted.status IN ('deleted', 'purged')
            ));
        END IF;
    END LOOP;
END
$$
"""


def _tried_briefly(statement: str) -> str:
    """`statement` (one taking a lock on `jobs`) tried for 50 ms at a time, with a pause
    between, as 0025's switch: while a lock request waits, every write queues behind it,
    so a long wait for one slow transaction would hold them all."""
    return f"""
DO $$
BEGIN
    FOR attempt IN 1..200 LOOP
        BEGIN
            SET LOCAL lock_timeout = '50ms';
            {statement};
            SET LOCAL lock_timeout = '5s';
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            PERFORM pg_sleep(0.02 + 0.08 * random());
        END;
    END LOOP;
    RAISE EXCEPTION 'jobs stayed locked by others for 200 tries: migrate again later';
END
$$
"""


# Each waiting job that shares a count gets one of its own, with the count's value, and
# the count's edges (those of its `depends_on` the count has, looked up by key).
_UNSHARE = """
WITH sharing AS MATERIALIZED (
    SELECT jobs.id, jobs.wait_id, jobs.depends_on FROM jobs
    WHERE jobs.status = 'waiting' AND jobs.wait_id IS NOT NULL
),
counts AS (
    INSERT INTO job_waits (job_id, remaining)
    SELECT sharing.id, job_waits.remaining
    FROM sharing JOIN job_waits ON job_waits.job_id = sharing.wait_id
    ON CONFLICT (job_id) DO UPDATE SET remaining = excluded.remaining
)
INSERT INTO job_dependencies (depends_on, job_id)
SELECT dependency, sharing.id
FROM sharing, unnest(sharing.depends_on) AS dependency
WHERE EXISTS (
    SELECT FROM job_dependencies AS shared
    WHERE shared.depends_on = dependency AND shared.job_id = sharing.wait_id
)
ON CONFLICT DO NOTHING
"""

# The shared counts (no job has their ids). Their edges stay, counting off nothing, until
# their dependencies are deleted, as 0025 keeps the edges of jobs no longer waiting.
_DROP_SHARED = """
DELETE FROM job_waits
WHERE NOT EXISTS (SELECT FROM jobs WHERE jobs.id = job_waits.job_id)
"""


def upgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(_tried_briefly("ALTER TABLE jobs ADD COLUMN IF NOT EXISTS wait_id uuid"))
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {_INDEX}")
        op.execute(f"CREATE INDEX CONCURRENTLY {_INDEX} {_INDEX_DEFINITION}")
        op.execute(_TRACK)
        op.execute(_COUNT)


def _revision_0025() -> ModuleType:
    path = Path(__file__).with_name("0025_dependency_counts.py")
    spec = importlib.util.spec_from_file_location("jobqueue_revision_0025", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot read revision 0025 from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def downgrade() -> None:
    before = _revision_0025()
    # No release between the unsharing and the switch of the functions: 0025's would not
    # find a shared count's jobs, this revision's would count both.
    op.execute(_tried_briefly("LOCK TABLE jobs IN SHARE ROW EXCLUSIVE MODE"))
    op.execute("SET LOCAL enable_seqscan = off")  # the waiting jobs by their index
    op.execute(_UNSHARE)
    op.execute(_DROP_SHARED)
    op.execute(before._TRACK)
    op.execute(before._COUNT)
    op.execute("SET LOCAL enable_seqscan = on")
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {_INDEX}")
        op.execute(_tried_briefly("ALTER TABLE jobs DROP COLUMN IF EXISTS wait_id"))
