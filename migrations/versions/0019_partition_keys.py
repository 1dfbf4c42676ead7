"""Partition keys and per-key limits: a job's share of its queue, and how many of one
key's jobs may run at once.

`jobs` gains `partition_key` and two small partial indexes holding only jobs that have
one: the pending ones by queue and key (a claim's loose scan of the keys) and the running
ones (each key's slots). `queues` gains `key_concurrency`. `jobqueue_free_slots` takes a
key's turn (an advisory lock) and counts its running jobs with a snapshot taken after it,
as `jobqueue_running_jobs` (0018) counts a queue's after its row is locked.

Safe on a live table: a nullable column without a default is a catalog change (its lock
tried 50 ms at a time, as every ALTER here: `_briefly`); the indexes are built
CONCURRENTLY (an INVALID one left by an interrupted build is dropped first) and hold no
row until jobs have keys. Downgrading drops them all.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-05
"""

import runpy
from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out, not imported: a revision must keep meaning what it meant when written.
_INDEXES = {
    "ix_jobs_due_by_partition": "ON jobs (queue, partition_key, priority, run_at, id)"
    " WHERE status = 'pending' AND partition_key IS NOT NULL",
    "ix_jobs_running_by_partition": "ON jobs (queue, partition_key)"
    " WHERE status = 'processing' AND partition_key IS NOT NULL",
}

# The free slots of partition key `of_key` in queue `of_queue` (`cap` less its running
# jobs, but those in `ending`), for the claim that takes that key's turn: the key's
# advisory lock (of this transaction, released at its commit), tried first, then its
# running jobs counted by a statement of their own, so with a snapshot taken after the
# lock. None if another claim holds the key's turn: that claim is taking its slots.
_FREE_SLOTS = """
CREATE OR REPLACE FUNCTION jobqueue_free_slots(
    of_queue text, of_key text, ending uuid[], cap integer
)
RETURNS integer
LANGUAGE plpgsql VOLATILE STRICT
AS $$
BEGIN
    IF NOT pg_try_advisory_xact_lock(
        hashtext('jobqueue partition key'), hashtext(of_queue || '/' || of_key)
    ) THEN
        RETURN NULL;
    END IF;
    RETURN cap - (
        SELECT count(*) FROM (
            SELECT FROM jobs
            WHERE jobs.queue = of_queue
              AND jobs.partition_key = of_key
              AND jobs.status = 'processing'
              AND NOT (jobs.id = ANY (ending))
            LIMIT cap
        ) AS running
    );
END
$$
"""


# How the locks are taken, written once for every revision (`migrations/locks.py`).
_briefly = runpy.run_path(str(Path(__file__).parents[1] / "locks.py"))["briefly"]


def upgrade() -> None:
    op.execute(
        _briefly(
            "ALTER TABLE jobs ADD COLUMN IF NOT EXISTS partition_key text",
            "ALTER TABLE queues ADD COLUMN IF NOT EXISTS key_concurrency integer"
            " CONSTRAINT ck_queues_key_concurrency CHECK (key_concurrency BETWEEN 1 AND 10000)",
        )
    )
    op.execute(_FREE_SLOTS)
    with op.get_context().autocommit_block():
        for name, definition in _INDEXES.items():
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
            op.execute(f"CREATE INDEX CONCURRENTLY {name} {definition}")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        for name in _INDEXES:
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
    op.execute("DROP FUNCTION IF EXISTS jobqueue_free_slots(text, text, uuid[], integer)")
    op.execute(
        _briefly(
            "ALTER TABLE queues DROP COLUMN IF EXISTS key_concurrency",
            "ALTER TABLE jobs DROP COLUMN IF EXISTS partition_key",
        )
    )
