"""Finished jobs indexed by status, then type, then when they finished, in place of
`(status, updated_at)`: completed jobs can be listed by type, and the index still holds
one entry per finished row, so a completion writes no more entries than before.

Retention and the listing of every type read it as a merge of the types' ranges
(`adapters/postgres/by_type.py`).

Safe on a live table: the new index is built CONCURRENTLY, outside the migration's
transaction (Alembic's autocommit block), then the old one is dropped CONCURRENTLY, so
submissions, claims and outcome writes go on throughout; retention keeps the old index
until the new one is valid. An INVALID index left by an interrupted build is dropped
first, so the migration can simply be run again.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out, not imported: a revision must keep meaning what it meant when written.
_FINISHED = "status IN ('completed', 'failed')"


def upgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_jobs_finished_by_type")
        op.execute(
            "CREATE INDEX CONCURRENTLY ix_jobs_finished_by_type"
            f" ON jobs (status, type, updated_at) WHERE {_FINISHED}"
        )
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_jobs_finished")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        # The older index back first, so that the older version's retention has it.
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_jobs_finished")
        op.execute(
            "CREATE INDEX CONCURRENTLY ix_jobs_finished"
            f" ON jobs (status, updated_at) WHERE {_FINISHED}"
        )
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_jobs_finished_by_type")
