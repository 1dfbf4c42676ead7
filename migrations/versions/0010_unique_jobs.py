"""Unique jobs: a key per unique job, the statuses it counts in, and the unique index
that lets one job per key in among those statuses.

Safe on a live table: two nullable columns (a catalog change, in a transaction of its
own, its lock tried 50 ms at a time: `_briefly`), then the index built CONCURRENTLY
outside the migration's transaction; an INVALID index left by an interrupted build is
dropped first, so the migration can simply be run again. No existing job has a key, so
the index starts empty.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

import runpy
from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# How the locks are taken, written once for every revision (`migrations/locks.py`).
_briefly = runpy.run_path(str(Path(__file__).parents[1] / "locks.py"))["briefly"]


def upgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(
            _briefly(
                "ALTER TABLE jobs ADD COLUMN IF NOT EXISTS unique_key text,"
                " ADD COLUMN IF NOT EXISTS unique_states text[]"
            )
        )
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS uq_jobs_unique_key")
        op.execute(
            "CREATE UNIQUE INDEX CONCURRENTLY uq_jobs_unique_key ON jobs (unique_key)"
            " WHERE unique_key IS NOT NULL AND status = ANY (unique_states)"
        )


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS uq_jobs_unique_key")
        op.execute(
            _briefly(
                "ALTER TABLE jobs DROP COLUMN IF EXISTS unique_key,"
                " DROP COLUMN IF EXISTS unique_states"
            )
        )
