"""Dependencies and workflows: jobs that wait for other jobs, released by the statement
that ends the job they waited for.

`jobs` gains `depends_on` (the ids a job waits for, kept), `run_anyway`, `workflow_id`,
`waiting_for` (how many of its dependencies are still live) and `has_dependents`, and a
`waiting` status outside the claim's index. `job_dependencies` holds the edges still to
be met, a row per (dependency, dependent).

Releasing is a trigger's work, so that every statement that ends a job does it (the
worker's endings, recovery's dead letters, a cancel, a bulk action, a delete, and any
statement added later) and nothing scans for it:
- A row trigger notes each ending of a job that has dependents (`has_dependents`: its
  WHEN clause is all other endings pay) in a temporary table of the session, and says
  so in a setting local to the transaction.
- A statement trigger, once the statement's rows are written, deletes the noted jobs'
  edges and counts them off their waiting dependents, locked in id order, whatever the
  order the statement ended its rows in (it fires after every status-writing statement,
  and returns at once when nothing was noted): a row trigger decrementing each dependent as
  its row came would lock shared fan-in rows in a different order in each concurrent
  batch, and deadlock. A dependent whose last dependency ended is pending (due now at
  the earliest, and the workers woken); one whose dependency did not complete is
  cancelled, unless it runs anyway. Those cancels are endings too: the function loops
  over what they note (a loop, not recursion: a chain of a thousand cancelled jobs
  would exceed the stack), and its own statements do not fire it again.

Safe on a live table: nullable columns and constant defaults are catalog changes, and so
are the table, the functions and the triggers (those on `jobs` swapped in one
transaction); each change to `jobs` tries its lock for 50 ms at a time (`_briefly`); the
status CHECK is replaced NOT VALID and validated under a lock that lets writes go on; the
indexes are built CONCURRENTLY (an INVALID one left by an interrupted build dropped
first) and hold no row until jobs wait or belong to a workflow. Downgrading refuses while
jobs wait (0023 has no status for them), then drops it all.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-05
"""

import runpy
from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out, not imported: a revision must keep meaning what it meant when written.
_BEFORE = "'pending', 'processing', 'completed', 'failed', 'dead_letter', 'cancelled'"
_AFTER = f"'waiting', {_BEFORE}"
_LIVE = "('waiting', 'pending', 'processing')"

_COLUMNS = """
ALTER TABLE jobs
    ADD COLUMN IF NOT EXISTS depends_on uuid[],
    ADD COLUMN IF NOT EXISTS run_anyway boolean NOT NULL DEFAULT false,
    ADD COLUMN IF NOT EXISTS workflow_id uuid,
    ADD COLUMN IF NOT EXISTS waiting_for integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS has_dependents boolean NOT NULL DEFAULT false
"""

_EDGES = """
CREATE TABLE IF NOT EXISTS job_dependencies (
    depends_on uuid NOT NULL,
    job_id uuid NOT NULL,
    CONSTRAINT pk_job_dependencies PRIMARY KEY (depends_on, job_id)
)
"""

_INDEXES = {
    "ix_jobs_waiting": "ON jobs (run_at) WHERE status = 'waiting'",
    "ix_jobs_workflow": "ON jobs (workflow_id, created_at, id) WHERE workflow_id IS NOT NULL",
}

# Noted in a temporary table of the session (made at its first noted ending, kept while
# the connection lives), with a transaction-local flag saying there is something to do:
# a string of them in a setting was copied whole at every append, and a statement ending
# ten thousand jobs with dependents took 11-21 s (measured).
_NOTE_ENDING = """
CREATE OR REPLACE FUNCTION jobqueue_note_ending() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('jobqueue.ended', true), '') = '' THEN
        -- Not IF NOT EXISTS, which sends a NOTICE each time the table exists.
        IF to_regclass('pg_temp.jobqueue_ended') IS NULL THEN
            CREATE TEMPORARY TABLE jobqueue_ended (id uuid, status text);
        END IF;
        PERFORM set_config('jobqueue.ended', 'on', true);
    END IF;
    IF TG_OP = 'DELETE' THEN
        INSERT INTO jobqueue_ended VALUES (OLD.id, 'deleted');
    ELSE
        INSERT INTO jobqueue_ended VALUES (NEW.id, NEW.status);
    END IF;
    RETURN NULL;
END
$$
"""

_RELEASE = """
CREATE OR REPLACE FUNCTION jobqueue_release_dependents() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    ended_ids uuid[];
    ended_statuses text[];
    started integer;
BEGIN
    IF coalesce(current_setting('jobqueue.ended', true), '') = ''
        OR coalesce(current_setting('jobqueue.releasing', true), '') = 'on' THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('jobqueue.releasing', 'on', true);
    LOOP
        EXIT WHEN current_setting('jobqueue.ended') = '';
        PERFORM set_config('jobqueue.ended', '', true);
        -- Taken out as arrays: joined as the temporary table, unanalysed, the edges and
        -- the jobs were read whole (a hash join); an array's unnest is planned as the few
        -- rows it is, each looked up by its key.
        WITH taken AS (DELETE FROM jobqueue_ended RETURNING id, status)
        SELECT array_agg(id), array_agg(status) INTO ended_ids, ended_statuses FROM taken;
        WITH ended AS (
            SELECT * FROM unnest(ended_ids, ended_statuses) AS ended (id, status)
        ),
        met AS (
            DELETE FROM job_dependencies
            USING ended
            WHERE job_dependencies.depends_on = ended.id
            RETURNING job_dependencies.job_id, job_dependencies.depends_on, ended.status
        ),
        counted AS (
            SELECT job_id,
                count(*) AS n,
                min(depends_on::text || ' ' || status)
                    FILTER (WHERE status <> 'completed') AS failed
            FROM met
            GROUP BY job_id
        ),
        locked AS MATERIALIZED (
            SELECT jobs.id, counted.n, counted.failed IS NOT NULL AND NOT jobs.run_anyway
                AS cancelled, counted.failed
            FROM jobs JOIN counted ON counted.job_id = jobs.id
            WHERE jobs.status = 'waiting'
            ORDER BY jobs.id
            FOR UPDATE OF jobs
        ),
        released AS (
            UPDATE jobs
            SET waiting_for = greatest(jobs.waiting_for - locked.n, 0),
                status = CASE
                    WHEN locked.cancelled THEN 'cancelled'
                    WHEN jobs.waiting_for <= locked.n THEN 'pending'
                    ELSE 'waiting'
                END,
                run_at = CASE
                    WHEN NOT locked.cancelled AND jobs.waiting_for <= locked.n
                    THEN greatest(jobs.run_at, now())
                    ELSE jobs.run_at
                END,
                last_error = CASE
                    WHEN locked.cancelled
                    THEN 'job ' || split_part(locked.failed, ' ', 1)
                        || ' it depends on ended ' || split_part(locked.failed, ' ', 2)
                    ELSE jobs.last_error
                END,
                updated_at = now()
            FROM locked
            WHERE jobs.id = locked.id
            RETURNING jobs.status
        )
        SELECT count(*) FILTER (WHERE status = 'pending') INTO started FROM released;
        IF started > 0 THEN
            PERFORM pg_notify('jobqueue_jobs', '');
        END IF;
    END LOOP;
    PERFORM set_config('jobqueue.releasing', '', true);
    RETURN NULL;
END
$$
"""

_TRIGGERS = {
    "jobs_note_ending": f"""
        AFTER UPDATE OF status ON jobs
        FOR EACH ROW
        WHEN (OLD.has_dependents AND OLD.status IN {_LIVE} AND NEW.status NOT IN {_LIVE})
        EXECUTE FUNCTION jobqueue_note_ending()
    """,
    "jobs_note_deleted": f"""
        AFTER DELETE ON jobs
        FOR EACH ROW
        WHEN (OLD.has_dependents AND OLD.status IN {_LIVE})
        EXECUTE FUNCTION jobqueue_note_ending()
    """,
    # Fired after the row triggers of its statement, so without a WHEN clause: a
    # statement trigger's is evaluated before they run. The function returns at once
    # when nothing was noted, and when its own statements fire it.
    "jobs_release_dependents": """
        AFTER UPDATE OF status OR DELETE ON jobs
        FOR EACH STATEMENT
        EXECUTE FUNCTION jobqueue_release_dependents()
    """,
}


# 0023's announcement of a watched job's end, with `waiting` among the live statuses.
def _announce_ending(live: str) -> str:
    return f"""
    CREATE TRIGGER jobs_announce_ending
        AFTER UPDATE OF status ON jobs
        FOR EACH ROW
        WHEN (NEW.watched AND NEW.status NOT IN {live})
        EXECUTE FUNCTION jobqueue_announce_ending()
    """


# How the locks are taken, written once for every revision (`migrations/locks.py`).
_briefly = runpy.run_path(str(Path(__file__).parents[1] / "locks.py"))["briefly"]


def _status_check(statuses: str) -> None:
    op.execute(
        _briefly(
            "ALTER TABLE jobs DROP CONSTRAINT IF EXISTS ck_jobs_status,"
            f" ADD CONSTRAINT ck_jobs_status CHECK (status IN ({statuses})) NOT VALID"
        )
    )
    op.execute("ALTER TABLE jobs VALIDATE CONSTRAINT ck_jobs_status")


def upgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(_briefly(_COLUMNS))
        op.execute(_EDGES)
        op.execute(_NOTE_ENDING)
        op.execute(_RELEASE)
        # The triggers swapped in one transaction: no ending goes unannounced between.
        triggers = [
            each
            for name, definition in _TRIGGERS.items()
            for each in (
                f"DROP TRIGGER IF EXISTS {name} ON jobs",
                f"CREATE TRIGGER {name} {definition}",
            )
        ]
        op.execute(
            _briefly(
                *triggers,
                "DROP TRIGGER IF EXISTS jobs_announce_ending ON jobs",
                _announce_ending(_LIVE),
            )
        )
        _status_check(_AFTER)
        for name, definition in _INDEXES.items():
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
            op.execute(f"CREATE INDEX CONCURRENTLY {name} {definition}")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(
            """
            DO $$
            BEGIN
                IF EXISTS (SELECT FROM jobs WHERE status = 'waiting') THEN
                    RAISE EXCEPTION 'jobs are waiting for their dependencies; revision 0023'
                        ' has no status for them: cancel or delete them first';
                END IF;
            END
            $$
            """
        )
        _status_check(_BEFORE)
        for name in _INDEXES:
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
        op.execute(
            _briefly(
                "DROP TRIGGER IF EXISTS jobs_announce_ending ON jobs",
                _announce_ending("('pending', 'processing')"),
                *(f"DROP TRIGGER IF EXISTS {name} ON jobs" for name in _TRIGGERS),
            )
        )
        op.execute("DROP FUNCTION IF EXISTS jobqueue_release_dependents()")
        op.execute("DROP FUNCTION IF EXISTS jobqueue_note_ending()")
        op.execute("DROP TABLE IF EXISTS job_dependencies")
        op.execute(
            _briefly(
                "ALTER TABLE jobs DROP COLUMN IF EXISTS has_dependents,"
                " DROP COLUMN IF EXISTS waiting_for, DROP COLUMN IF EXISTS workflow_id,"
                " DROP COLUMN IF EXISTS run_anyway, DROP COLUMN IF EXISTS depends_on"
            )
        )
