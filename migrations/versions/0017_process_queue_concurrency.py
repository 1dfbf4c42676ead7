"""`processes.queue_concurrency`: how many attempts a process runs at once in each of its
queues, in the order of `queues`, so that the dashboard's workers page shows
`QUEUES=default=10,emails=2` as it was set rather than as 12 in all.

A nullable column with no default on a small table (a row per live process): adding it
rewrites nothing. Processes of an earlier version leave it NULL, and are shown with
their total.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("SET lock_timeout = '5s'")
    op.execute("ALTER TABLE processes ADD COLUMN IF NOT EXISTS queue_concurrency integer[]")
    op.execute("RESET lock_timeout")


def downgrade() -> None:
    op.execute("SET lock_timeout = '5s'")
    op.execute("ALTER TABLE processes DROP COLUMN IF EXISTS queue_concurrency")
    op.execute("RESET lock_timeout")
