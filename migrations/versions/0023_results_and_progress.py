"""Results, progress and watched endings: what a handler returned (`result`), its last
report of how far it got (`progress`), and whether someone waits for the job's end
(`watched`), with the triggers that announce a watched job's end.

A waiter marks the job `watched` (an UPDATE of the live row, so an ending writing the
row after it sees the mark, and one writing it before leaves the waiter a finished job to
read); every statement that ends a job, or deletes it, then notifies
`jobqueue_endings` with its id, delivered at commit. The triggers fire for watched rows
only (their WHEN clause is all an unwatched ending pays), so the queue's hot path sends
no NOTIFY: at every commit with one PostgreSQL serialises on its notification queue.
Triggers rather than a NOTIFY in each statement: endings are written by the worker, by
lease recovery, by an operator's cancel and bulk actions and by a delete, and a trigger
covers each, and every statement added later.

Safe on a live table: nullable columns and a column with a constant default are catalog
changes, and so are the function and the triggers (CREATE TRIGGER's SHARE ROW EXCLUSIVE
lock lasts only for that), each lock on `jobs` tried 50 ms at a time (`_briefly`).
Downgrading drops them.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-05
"""

import runpy
from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out, not imported: a revision must keep meaning what it meant when written.

_COLUMNS = """
ALTER TABLE jobs
    ADD COLUMN IF NOT EXISTS result jsonb,
    ADD COLUMN IF NOT EXISTS progress jsonb,
    ADD COLUMN IF NOT EXISTS watched boolean NOT NULL DEFAULT false
"""

_ANNOUNCE = """
CREATE OR REPLACE FUNCTION jobqueue_announce_ending() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('jobqueue_endings', OLD.id::text);
    ELSE
        PERFORM pg_notify('jobqueue_endings', NEW.id::text);
    END IF;
    RETURN NULL;
END
$$
"""

# The live statuses are the only ones a job leaves by being written again: any other is
# an end (finished, or held as a dead letter).
_ON_ENDING = """
CREATE TRIGGER jobs_announce_ending
    AFTER UPDATE OF status ON jobs
    FOR EACH ROW
    WHEN (NEW.watched AND NEW.status NOT IN ('pending', 'processing'))
    EXECUTE FUNCTION jobqueue_announce_ending()
"""

_ON_DELETE = """
CREATE TRIGGER jobs_announce_deleted
    AFTER DELETE ON jobs
    FOR EACH ROW
    WHEN (OLD.watched)
    EXECUTE FUNCTION jobqueue_announce_ending()
"""


# How the locks are taken, written once for every revision (`migrations/locks.py`).
_briefly = runpy.run_path(str(Path(__file__).parents[1] / "locks.py"))["briefly"]


def upgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(_briefly(_COLUMNS))
        op.execute(_ANNOUNCE)
        op.execute(
            _briefly(
                "DROP TRIGGER IF EXISTS jobs_announce_ending ON jobs",
                _ON_ENDING,
                "DROP TRIGGER IF EXISTS jobs_announce_deleted ON jobs",
                _ON_DELETE,
            )
        )


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(
            _briefly(
                "DROP TRIGGER IF EXISTS jobs_announce_deleted ON jobs",
                "DROP TRIGGER IF EXISTS jobs_announce_ending ON jobs",
            )
        )
        op.execute("DROP FUNCTION IF EXISTS jobqueue_announce_ending()")
        op.execute(
            _briefly(
                "ALTER TABLE jobs DROP COLUMN IF EXISTS watched,"
                " DROP COLUMN IF EXISTS progress, DROP COLUMN IF EXISTS result"
            )
        )
