"""Queues and priorities: every job is in a named queue and has a priority (0 most
urgent); the claim reads one queue's due jobs by priority, then due time.

Safe on a live table:
- The columns have constant defaults, so adding them rewrites nothing (PostgreSQL 11+):
  the ALTER holds its exclusive lock only for the catalog change, in a transaction of
  its own. It tries for that lock 50 ms at a time (`_briefly`), so that no statement on
  `jobs` queues behind it for longer; after 200 tries it fails: run the migration again
  once the transaction holding `jobs` is gone (every step is skipped when already done).
- The priority's CHECK is added NOT VALID (no scan under the lock), then validated,
  which scans the table under a lock that lets reads and writes go on.
- The claim's index is built CONCURRENTLY, outside the migration's transaction
  (Alembic's autocommit block); an INVALID one left by an interrupted build is dropped
  first.

It replaces the `(run_at, id)` index, dropped CONCURRENTLY once the new one is valid:
listing pending jobs reads the claim's index too, in the order claims take them, and a
second index of every pending job would cost each submission one more entry.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

import runpy
from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out, not imported: a revision must keep meaning what it meant when written.
# Only the priority is checked: a row outside 0-9 would be claimed by nobody, ever (the
# claim reads those ranges only). A queue name is checked where jobs are made; in the
# table, a regular-expression CHECK cost a fifth of a bulk COPY's rows per second
# (measured), and a row with an odd queue name is only a queue no process is given.
_PRIORITY_CHECK = "priority BETWEEN 0 AND 9"


# How the locks are taken, written once for every revision (`migrations/locks.py`).
_briefly = runpy.run_path(str(Path(__file__).parents[1] / "locks.py"))["briefly"]


def upgrade() -> None:
    # Each statement its own transaction: the ALTER's exclusive lock must be released
    # before the validation scans, and a concurrent index build cannot run in one. Each
    # step is skipped when already done, so an interrupted run can simply be run again.
    with op.get_context().autocommit_block():
        op.execute(
            _briefly(
                "ALTER TABLE jobs"
                " ADD COLUMN IF NOT EXISTS queue text NOT NULL DEFAULT 'default',"
                " ADD COLUMN IF NOT EXISTS priority smallint NOT NULL DEFAULT 0",
                "IF NOT EXISTS (SELECT FROM pg_constraint WHERE conname = 'ck_jobs_priority')"
                " THEN ALTER TABLE jobs ADD CONSTRAINT ck_jobs_priority"
                f" CHECK ({_PRIORITY_CHECK}) NOT VALID; END IF",
            )
        )
        op.execute("ALTER TABLE jobs VALIDATE CONSTRAINT ck_jobs_priority")
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_jobs_due_by_queue")
        op.execute(
            "CREATE INDEX CONCURRENTLY ix_jobs_due_by_queue"
            " ON jobs (queue, priority, run_at, id) WHERE status = 'pending'"
        )
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_jobs_due_key")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        # 0004's index back first, so that its claims have it from their first statement.
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_jobs_due_key")
        op.execute(
            "CREATE INDEX CONCURRENTLY ix_jobs_due_key"
            " ON jobs (run_at, id) WHERE status = 'pending'"
        )
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_jobs_due_by_queue")
        # Dropping a column is a catalog change too; its constraints go with it.
        op.execute(
            _briefly("ALTER TABLE jobs DROP COLUMN IF EXISTS queue, DROP COLUMN IF EXISTS priority")
        )
