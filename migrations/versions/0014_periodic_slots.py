"""The last slot each periodic job ran: a row per schedule, advanced by the statement that
inserts a slot's job, so a slot runs at most once, ever, whatever retention has deleted
since and whichever process inserts it.

A new, empty table: creating it takes no lock on `jobs`, so this is safe on a live
database.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "CREATE TABLE IF NOT EXISTS periodic_slots ("
        " name text NOT NULL,"
        " last_slot timestamptz NOT NULL,"
        " last_job_id uuid,"
        " updated_at timestamptz NOT NULL DEFAULT now(),"
        " CONSTRAINT pk_periodic_slots PRIMARY KEY (name))"
    )


def downgrade() -> None:
    # The older version keeps one job per slot by the slot's unique key instead.
    op.execute("DROP TABLE IF EXISTS periodic_slots")
