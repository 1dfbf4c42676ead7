"""Indexes for retention (finished jobs by age) and for counting dead letters.

Both are partial, so the hot path's writes pay for them only when a job finishes or is
dead-lettered, and neither holds a pending or processing row.

Cost on a big table: Alembic runs a migration inside a transaction, where `CREATE INDEX
CONCURRENTLY` is not allowed, so this takes a SHARE lock on `jobs` while it reads the whole
table once to build them. Reads go on; submissions, claims and outcome writes wait until
the build ends: about two seconds for a million finished rows on a 2-core machine, longer
on a slow disk or a busy server. Where that stall matters, build them first without
blocking writes, then migrate (`IF NOT EXISTS` below then finds them and does nothing):

    CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_jobs_finished ON jobs (status, updated_at)
        WHERE status IN ('completed', 'failed');
    CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_jobs_dead_letter ON jobs (updated_at)
        WHERE status = 'dead_letter';

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Status leads: retention deletes one status at a time, oldest first, and each status
    # is then one contiguous range of the index, however long the other is kept.
    op.execute(
        "CREATE INDEX IF NOT EXISTS ix_jobs_finished ON jobs (status, updated_at) "
        "WHERE status IN ('completed', 'failed')"
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS ix_jobs_dead_letter ON jobs (updated_at) "
        "WHERE status = 'dead_letter'"
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS ix_jobs_dead_letter")
    op.execute("DROP INDEX IF EXISTS ix_jobs_finished")
