"""A job's own attempt timeout (`timeout`): resolved at submission from the submission
or its type's handler, so a job runs under the same limit whichever way it came in;
NULL for the service's JOB_TIMEOUT.

Safe on a live table: a nullable column without a default is a catalog change only (no
rewrite, no scan). The ALTER's exclusive lock lasts only for that, and waits for it at
most `lock_timeout` (5 s), failing rather than queueing every statement on `jobs` behind
a long transaction: run the migration again once that transaction is gone.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("SET lock_timeout = '5s'")
        op.execute("ALTER TABLE jobs ADD COLUMN IF NOT EXISTS timeout interval")
        op.execute("RESET lock_timeout")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("SET lock_timeout = '5s'")
        op.execute("ALTER TABLE jobs DROP COLUMN IF EXISTS timeout")
        op.execute("RESET lock_timeout")
