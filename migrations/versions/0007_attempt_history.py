"""Attempt history: when and where the latest attempt was claimed, and the endings of
the earlier ones.

Safe on a live table: three nullable columns without defaults are a catalog change
only (no rewrite, no scan). The ALTER's exclusive lock lasts only for that, and waits
for it at most `lock_timeout` (5 s), failing rather than queueing every statement on
`jobs` behind a long transaction: run the migration again once that transaction is gone.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("SET lock_timeout = '5s'")
        op.execute(
            "ALTER TABLE jobs"
            " ADD COLUMN IF NOT EXISTS started_at timestamptz,"
            " ADD COLUMN IF NOT EXISTS worker text,"
            " ADD COLUMN IF NOT EXISTS attempt_log jsonb"
        )
        op.execute("RESET lock_timeout")


def downgrade() -> None:
    # Dropping a column is a catalog change too; the history is lost.
    with op.get_context().autocommit_block():
        op.execute("SET lock_timeout = '5s'")
        op.execute(
            "ALTER TABLE jobs"
            " DROP COLUMN IF EXISTS attempt_log,"
            " DROP COLUMN IF EXISTS worker,"
            " DROP COLUMN IF EXISTS started_at"
        )
        op.execute("RESET lock_timeout")
