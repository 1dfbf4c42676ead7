"""Dependencies counted in a narrow table: how many of a waiting job's dependencies are
still live is kept in `job_waits` (a row per waiting job), and the edges of
`job_dependencies` stay until the job they depend on is deleted.

Why: in 0024 every ending counted itself off its dependents' `jobs` rows and deleted its
edges. In a fan where each job of a layer waits for all 100 of the layer before, a
layer's endings rewrote each of the next layer's rows once per statement (an `updated_at`
changed, so every index took a new entry: about 40 µs a row) and deleted 10,000 edge
rows, and the fan ran at a third of the rate of as many independent jobs (bench, fan).
Now an ending reads its edges and counts them off `job_waits` rows, two integers each
with room on their page, so the new versions stay there and no index changes; a `jobs`
row is written once, when its job is released or cancelled.

Counting stays exact because an edge is counted once per ending of its dependency:
- a row trigger notes each change of a job with dependents between live and ended (and
  each delete of one), and the statement trigger counts endings off and revivals (a
  retry) back on, for the dependents that are waiting, locked in id order as before: a
  retried dependency is waited for again by those that had counted its ending;
- `job_waits` follows `status = 'waiting'` by row triggers, whatever statement makes a job
  wait or stop waiting (a graph's insert writes its rows itself): its count starts at
  the row's `waiting_for`;
- a deleted job's edges are deleted with it (a live one's dependents count it as ended
  `deleted`, as before).

Safe on a live table: the table, functions and triggers are catalog changes. Upgrade and
downgrade each run in one transaction that locks `jobs` against writes (SHARE ROW
EXCLUSIVE, under a 5 s lock_timeout; reads go on) while it counts the waiting jobs and
switches the functions and triggers, so that no release runs in between: writes wait
for as long as that takes, which is reading the waiting jobs through `ix_jobs_waiting`
(milliseconds for thousands), not the table. Triggers are replaced in place (CREATE OR
REPLACE TRIGGER, PostgreSQL 14), never dropped and made again. Downgrading copies the
counts back into `waiting_for`, deletes the met edges of waiting jobs (0024 keeps only
edges still to be met) and restores 0024's functions and triggers (read from 0024's own
file).

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-05
"""

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out, not imported: a revision must keep meaning what it meant when written.
_LIVE = "('waiting', 'pending', 'processing')"

_WAITS = """
CREATE TABLE IF NOT EXISTS job_waits (
    job_id uuid NOT NULL,
    remaining integer NOT NULL,
    CONSTRAINT pk_job_waits PRIMARY KEY (job_id)
) WITH (fillfactor = 50)
"""

# Functions of new names, made before the switch while 0024's still run: the switch is
# then only the triggers'. The same temporary table as 0024's, now noting revivals (the
# job's new, live status) and deletes of ended jobs (`purged`: their edges go, their
# dependents counted them).
_NOTE = f"""
CREATE OR REPLACE FUNCTION jobqueue_note_change() RETURNS trigger
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
        INSERT INTO jobqueue_ended VALUES (
            OLD.id, CASE WHEN OLD.status IN {_LIVE} THEN 'deleted' ELSE 'purged' END
        );
    ELSE
        INSERT INTO jobqueue_ended VALUES (NEW.id, NEW.status);
    END IF;
    RETURN NULL;
END
$$
"""

# A job's row in `job_waits` while, and only while, it waits. A graph's insert writes the
# rows of the jobs it inserts waiting (`queries/dependencies.py`): an AFTER INSERT trigger,
# even one whose WHEN is false, cost every bulk insert 9 % (enqueue_many, measured).
_TRACK = """
CREATE OR REPLACE FUNCTION jobqueue_track_waiting() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'DELETE' AND NEW.status = 'waiting' THEN
        INSERT INTO job_waits (job_id, remaining) VALUES (NEW.id, NEW.waiting_for)
        ON CONFLICT (job_id) DO UPDATE SET remaining = excluded.remaining;
    ELSE
        DELETE FROM job_waits WHERE job_id = OLD.id;
    END IF;
    RETURN NULL;
END
$$
"""

# The statement trigger: returns at once unless something was noted (and when its own
# statements fire it), else counts.
_RELEASE = """
CREATE OR REPLACE FUNCTION jobqueue_release_counted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('jobqueue.ended', true), '') = ''
        OR coalesce(current_setting('jobqueue.releasing', true), '') = 'on' THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('jobqueue.releasing', 'on', true);
    PERFORM jobqueue_count_noted();
    PERFORM set_config('jobqueue.releasing', '', true);
    RETURN NULL;
END
$$
"""

# The counting, in a function of its own for its setting: generic plans. A custom plan
# is made for the arrays' values, and planning with a thousand ids in them took 90 ms
# (measured), longer than the counting; the statements below are planned for any
# arrays (a nested loop by key, whatever their length).
_COUNT = f"""
CREATE OR REPLACE FUNCTION jobqueue_count_noted() RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    noted_ids uuid[];
    noted_statuses text[];
    released_ids uuid[];
    started integer;
BEGIN
    LOOP
        EXIT WHEN current_setting('jobqueue.ended') = '';
        PERFORM set_config('jobqueue.ended', '', true);
        -- Taken out as arrays: joined as the temporary table, unanalysed, the edges and
        -- the jobs were read whole; an array's unnest is planned as the few rows it is.
        WITH taken AS (DELETE FROM jobqueue_ended RETURNING id, status)
        SELECT array_agg(id), array_agg(status) INTO noted_ids, noted_statuses FROM taken;
        -- Each noted job's edges, and then each dependent's row, looked up by key in a
        -- nested loop (a lateral subquery, not flattened: `OFFSET 0`, `FOR UPDATE`),
        -- whatever the statistics say: planned as a join, with the table analysed while
        -- it was empty, the edges were read whole for ten endings (30 ms, measured).
        WITH counted AS (
            SELECT edges.job_id, sum(noted.delta) AS delta, min(noted.failure) AS failed
            FROM (
                -- Per noted job, not per edge: what each of its edges counts for.
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
        -- Their counts locked in id order (the loop takes them sorted), so that
        -- concurrent endings of a fan-in's dependencies do not deadlock; a job's count
        -- is written under this lock only, and its `jobs` row once, when released.
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
        released AS (
            UPDATE jobs
            SET waiting_for = 0,
                status = CASE
                    WHEN counting.failed IS NOT NULL AND NOT jobs.run_anyway THEN 'cancelled'
                    ELSE 'pending'
                END,
                run_at = CASE
                    WHEN counting.failed IS NOT NULL AND NOT jobs.run_anyway THEN jobs.run_at
                    ELSE greatest(jobs.run_at, now())
                END,
                last_error = CASE
                    WHEN counting.failed IS NOT NULL AND NOT jobs.run_anyway
                    THEN 'job ' || split_part(counting.failed, ' ', 1)
                        || ' it depends on ended ' || split_part(counting.failed, ' ', 2)
                    ELSE jobs.last_error
                END,
                updated_at = now()
            FROM counting
            WHERE jobs.id = counting.job_id
              AND jobs.status = 'waiting'
              AND (counting.remaining <= 0 OR (counting.failed IS NOT NULL AND NOT jobs.run_anyway))
            RETURNING jobs.id, jobs.status
        )
        SELECT array_agg(id), count(*) FILTER (WHERE status = 'pending')
        INTO released_ids, started FROM released;
        -- Their counts go with their waiting, here rather than by the row trigger, which
        -- statements run by triggers do not fire (a call per released job cost more than
        -- the rest of the counting, measured).
        DELETE FROM job_waits WHERE job_id = ANY(released_ids);
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

_TRIGGERS = {
    # Between live and ended, either way: an ending is counted off, a retry back on.
    "jobs_note_ending": f"""
        AFTER UPDATE OF status ON jobs
        FOR EACH ROW
        WHEN (OLD.has_dependents AND (OLD.status IN {_LIVE}) <> (NEW.status IN {_LIVE}))
        EXECUTE FUNCTION jobqueue_note_change()
    """,
    "jobs_note_deleted": """
        AFTER DELETE ON jobs
        FOR EACH ROW
        WHEN (OLD.has_dependents)
        EXECUTE FUNCTION jobqueue_note_change()
    """,
    # As 0024's, with the new function: fired after the row triggers, without a WHEN.
    "jobs_release_dependents": """
        AFTER UPDATE OF status OR DELETE ON jobs
        FOR EACH STATEMENT
        EXECUTE FUNCTION jobqueue_release_counted()
    """,
    # Leaving `waiting` by a statement a trigger runs (the release, which drops the counts of
    # the jobs it released itself, or a user's trigger) keeps the count's row: it no
    # longer counts (only a waiting job is released), and goes with the job.
    "jobs_wait_changed": """
        AFTER UPDATE OF status ON jobs
        FOR EACH ROW
        WHEN ((OLD.status = 'waiting') <> (NEW.status = 'waiting')
            AND (NEW.status = 'waiting' OR pg_trigger_depth() = 0))
        EXECUTE FUNCTION jobqueue_track_waiting()
    """,
    "jobs_wait_deleted": """
        AFTER DELETE ON jobs
        FOR EACH ROW
        WHEN (OLD.depends_on IS NOT NULL)
        EXECUTE FUNCTION jobqueue_track_waiting()
    """,
}
_NEW_TRIGGERS = ("jobs_wait_changed", "jobs_wait_deleted")


# Tried for 50 ms at a time, with a pause between: while a lock request waits, every
# write queues behind it, so a long wait for one slow transaction would hold them all.
_LOCK_JOBS = """
DO $$
BEGIN
    FOR attempt IN 1..200 LOOP
        BEGIN
            SET LOCAL lock_timeout = '50ms';
            LOCK TABLE jobs IN SHARE ROW EXCLUSIVE MODE;
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


def _quiet_writes() -> None:
    """Hold every write of `jobs` back until this transaction ends: no release runs (and
    no graph is inserted) between counting the waiting jobs and switching the functions.
    `jobs` first: a writer holds it when it reaches `job_dependencies`, and locking that
    first deadlocked with such a writer (seen in the migration's test)."""
    op.execute(_LOCK_JOBS)
    # The waiting jobs read through their partial index whatever the statistics say (a
    # table filled and not yet analysed was read whole, 100 ms of held writes, seen in
    # the migration's test).
    op.execute("SET LOCAL enable_seqscan = off")


def _triggers(definitions: dict[str, str]) -> None:
    # Replaced in place (PostgreSQL 14), under the lock held already: a DROP would want
    # an ACCESS EXCLUSIVE lock, and leave a moment without the trigger.
    for name, definition in definitions.items():
        op.execute(f"CREATE OR REPLACE TRIGGER {name} {definition}")


def upgrade() -> None:
    op.execute("SET LOCAL lock_timeout = '5s'")
    op.execute(_WAITS)
    for function in (_NOTE, _TRACK, _COUNT, _RELEASE):
        op.execute(function)
    _quiet_writes()
    op.execute(
        "INSERT INTO job_waits (job_id, remaining)"
        " SELECT id, waiting_for FROM jobs WHERE status = 'waiting'"
        " ON CONFLICT (job_id) DO UPDATE SET remaining = excluded.remaining"
    )
    _triggers(_TRIGGERS)
    op.execute("DROP FUNCTION IF EXISTS jobqueue_release_dependents()")
    op.execute("DROP FUNCTION IF EXISTS jobqueue_note_ending()")


def _revision_0024() -> ModuleType:
    path = Path(__file__).with_name("0024_dependencies.py")
    spec = importlib.util.spec_from_file_location("jobqueue_revision_0024", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot read revision 0024 from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def downgrade() -> None:
    before = _revision_0024()
    op.execute(before._NOTE_ENDING)
    op.execute(before._RELEASE)
    _quiet_writes()
    op.execute(
        "UPDATE jobs SET waiting_for = job_waits.remaining FROM job_waits"
        " WHERE jobs.id = job_waits.job_id AND jobs.waiting_for <> job_waits.remaining"
    )
    # 0024 keeps only the edges still to be met, and would count a met one of a waiting
    # job again when its dependency, retried, ends again. Those are looked up from the
    # waiting jobs (`ix_jobs_waiting`, then by key), not by reading every edge under the
    # lock; the met edges of jobs not waiting stay (0024 counts off waiting jobs only).
    op.execute(
        f"""
        DELETE FROM job_dependencies
        USING (
            SELECT waiting.id, unnest(waiting.depends_on) AS dependency
            FROM jobs AS waiting WHERE waiting.status = 'waiting'
        ) AS edge
        WHERE job_dependencies.depends_on = edge.dependency
          AND job_dependencies.job_id = edge.id
          AND NOT EXISTS (
              SELECT FROM jobs WHERE jobs.id = edge.dependency AND jobs.status IN {_LIVE}
          )
        """
    )
    _triggers(before._TRIGGERS)
    for name in _NEW_TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {name} ON jobs")
    op.execute("DROP FUNCTION IF EXISTS jobqueue_track_waiting()")
    op.execute("DROP FUNCTION IF EXISTS jobqueue_release_counted()")
    op.execute("DROP FUNCTION IF EXISTS jobqueue_count_noted()")
    op.execute("DROP FUNCTION IF EXISTS jobqueue_note_change()")
    op.execute("DROP TABLE IF EXISTS job_waits")
