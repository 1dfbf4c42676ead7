"""Pausing queues: a row per queue an operator paused or resumed.

A new, empty table: creating it takes no lock on `jobs`, so this is safe on a live
database. The claim reads it by primary key in the same statement (one index probe,
once per claim), so a pause holds from the moment it commits.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "CREATE TABLE IF NOT EXISTS queues ("
        " name text NOT NULL,"
        " paused_at timestamptz,"
        " updated_at timestamptz NOT NULL DEFAULT now(),"
        " CONSTRAINT pk_queues PRIMARY KEY (name))"
    )


def downgrade() -> None:
    # Pauses are lost: every queue runs again on the older version.
    op.execute("DROP TABLE IF EXISTS queues")
