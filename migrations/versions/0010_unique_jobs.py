"""Unique jobs: a key per unique job, the statuses it counts in, and the unique index
that lets one job per key in among those statuses.

Safe on a live table: two nullable columns (a catalog change, in a transaction of its
own, waiting at most `lock_timeout` for its lock), then the index built CONCURRENTLY
outside the migration's transaction; an INVALID index left by an interrupted build is
dropped first, so the migration can simply be run again. No existing job has a key, so
the index starts empty.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("SET lock_timeout = '5s'")
        op.execute(
            "ALTER TABLE jobs ADD COLUMN IF NOT EXISTS unique_key text,"
            " ADD COLUMN IF NOT EXISTS unique_states text[]"
        )
        op.execute("RESET lock_timeout")
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS uq_jobs_unique_key")
        op.execute(
            "CREATE UNIQUE INDEX CONCURRENTLY uq_jobs_unique_key ON jobs (unique_key)"
            " WHERE unique_key IS NOT NULL AND status = ANY (unique_states)"
        )


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS uq_jobs_unique_key")
        op.execute("SET lock_timeout = '5s'")
        op.execute(
            "ALTER TABLE jobs DROP COLUMN IF EXISTS unique_key, DROP COLUMN IF EXISTS unique_states"
        )
        op.execute("RESET lock_timeout")
