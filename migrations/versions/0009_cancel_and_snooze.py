"""Cancel and snooze: a `cancelled` status, with an index of its own for listing and
retention, and a count of each job's snoozes.

Safe on a live table:
- `snoozes` has a constant default, so adding it rewrites nothing (PostgreSQL 11+).
- The status CHECK is replaced in one ALTER (the new one NOT VALID, so no scan under the
  exclusive lock), then validated under a lock that lets reads and writes go on. The
  ALTER tries for its lock 50 ms at a time (`_briefly`), so that no statement on `jobs`
  queues behind it for longer; after 200 tries it fails: run the migration again once
  the transaction holding `jobs` is gone (every step can be run again).
- The index is built CONCURRENTLY, outside the migration's transaction (Alembic's
  autocommit block); an INVALID one left by an interrupted build is dropped first. It is
  a new, small index rather than `cancelled` added to `ix_jobs_finished_by_type`, which
  would mean rebuilding an index of every finished row.

Downgrade: 0008 knows no cancelled status, so cancelled jobs become failed ones (their
attempt log keeps the cancel) before the CHECK is put back.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

import runpy
from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out, not imported: a revision must keep meaning what it meant when written.
_BEFORE = "'pending', 'processing', 'completed', 'failed', 'dead_letter'"
_AFTER = _BEFORE + ", 'cancelled'"


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
        op.execute(
            _briefly(
                "ALTER TABLE jobs ADD COLUMN IF NOT EXISTS snoozes integer NOT NULL DEFAULT 0,"
                " DROP CONSTRAINT IF EXISTS ck_jobs_snoozes,"
                " ADD CONSTRAINT ck_jobs_snoozes CHECK (snoozes >= 0) NOT VALID"
            )
        )
        op.execute("ALTER TABLE jobs VALIDATE CONSTRAINT ck_jobs_snoozes")
        _status_check(_AFTER)
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_jobs_cancelled")
        op.execute(
            "CREATE INDEX CONCURRENTLY ix_jobs_cancelled"
            " ON jobs (status, type, updated_at) WHERE status IN ('cancelled')"
        )


def downgrade() -> None:
    with op.get_context().autocommit_block():
        # Few rows, by the index: cancelled jobs are what operators stopped by hand.
        op.execute("UPDATE jobs SET status = 'failed' WHERE status = 'cancelled'")
        _status_check(_BEFORE)
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_jobs_cancelled")
        op.execute(_briefly("ALTER TABLE jobs DROP COLUMN IF EXISTS snoozes"))
