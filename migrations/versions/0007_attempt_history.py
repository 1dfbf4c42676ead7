"""Attempt history: when and where the latest attempt was claimed, and the endings of
the earlier ones.

Safe on a live table: three nullable columns without defaults are a catalog change
only (no rewrite, no scan). The ALTER's exclusive lock lasts only for that, and waits
for it 50 ms at a time (`_briefly`), so that no statement on `jobs` queues behind it for
longer; after 200 tries it fails: run the migration again once the transaction holding
`jobs` is gone.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

import runpy
from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# How the locks are taken, written once for every revision (`migrations/locks.py`).
_briefly = runpy.run_path(str(Path(__file__).parents[1] / "locks.py"))["briefly"]


def upgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(
            _briefly(
                "ALTER TABLE jobs"
                " ADD COLUMN IF NOT EXISTS started_at timestamptz,"
                " ADD COLUMN IF NOT EXISTS worker text,"
                " ADD COLUMN IF NOT EXISTS attempt_log jsonb"
            )
        )


def downgrade() -> None:
    # Dropping a column is a catalog change too; the history is lost.
    with op.get_context().autocommit_block():
        op.execute(
            _briefly(
                "ALTER TABLE jobs"
                " DROP COLUMN IF EXISTS attempt_log,"
                " DROP COLUMN IF EXISTS worker,"
                " DROP COLUMN IF EXISTS started_at"
            )
        )
