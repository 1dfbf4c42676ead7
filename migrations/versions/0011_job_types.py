"""Published job types: a row per job type a worker runs, with its payload's JSON Schema
and its options, so that an API process without the workers' code can check submissions.

A new, empty table: creating it takes no lock on `jobs`, so this is safe on a live
database.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "CREATE TABLE IF NOT EXISTS job_types ("
        " name text NOT NULL,"
        " payload_schema jsonb,"
        " options jsonb NOT NULL,"
        " description text,"
        " published_at timestamptz NOT NULL DEFAULT now(),"
        " published_by text NOT NULL,"
        " CONSTRAINT pk_job_types PRIMARY KEY (name))"
    )


def downgrade() -> None:
    # An older API knows only the types whose code it imports, as it did before.
    op.execute("DROP TABLE IF EXISTS job_types")
