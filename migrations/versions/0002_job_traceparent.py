"""Store the submitting request's W3C trace context with each job.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable with no default: adding it rewrites nothing and takes the lock briefly.
    op.execute("ALTER TABLE jobs ADD COLUMN traceparent text")


def downgrade() -> None:
    op.execute("ALTER TABLE jobs DROP COLUMN traceparent")
