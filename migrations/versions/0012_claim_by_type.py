"""Pending jobs indexed by queue, priority, then type, in place of `(queue, priority,
run_at, id)`: a worker claims only the job types it has handlers for, one range of this
index per (priority, type), so the jobs of types it cannot run are never read by its
claims, however many wait for another process.

Safe on a live table: the new index is built CONCURRENTLY, outside the migration's
transaction (Alembic's autocommit block), then the old one is dropped CONCURRENTLY, so
submissions, claims and outcome writes go on throughout. An INVALID index left by an
interrupted build is dropped first, so the migration can simply be run again. Until the
processes of the older version stop, their claims read the new index less well (they
sort each priority's pending jobs): deploy the new version's workers soon after.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out, not imported: a revision must keep meaning what it meant when written.
_PENDING = "status = 'pending'"


def upgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_jobs_due_by_type")
        op.execute(
            "CREATE INDEX CONCURRENTLY ix_jobs_due_by_type"
            f" ON jobs (queue, priority, type, run_at, id) WHERE {_PENDING}"
        )
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_jobs_due_by_queue")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        # The older index back first, so that the older version's claims have it.
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_jobs_due_by_queue")
        op.execute(
            "CREATE INDEX CONCURRENTLY ix_jobs_due_by_queue"
            f" ON jobs (queue, priority, run_at, id) WHERE {_PENDING}"
        )
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_jobs_due_by_type")
