"""The live processes (`processes`): each worker process's row, refreshed with its
heartbeats, says which queues and types it consumes, so that a queue nobody consumes can
be told from one that is merely busy; and `queues.unconsumed_warned_at`, so that such a
queue is warned of once, by one process.

A new table and a nullable column on `queues` (a small table of queue names): neither
touches `jobs`, so this is safe on a live database.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("SET lock_timeout = '5s'")
    op.execute(
        "CREATE TABLE IF NOT EXISTS processes ("
        " id uuid NOT NULL,"
        " host text NOT NULL,"
        " pid integer NOT NULL,"
        " version text NOT NULL,"
        " queues text[] NOT NULL,"
        " types text[] NOT NULL,"
        " concurrency integer NOT NULL,"
        " running integer NOT NULL,"
        " started_at timestamptz NOT NULL DEFAULT now(),"
        " heartbeat_at timestamptz NOT NULL DEFAULT now(),"
        " expires_at timestamptz NOT NULL,"
        " CONSTRAINT pk_processes PRIMARY KEY (id))"
    )
    op.execute("ALTER TABLE queues ADD COLUMN IF NOT EXISTS unconsumed_warned_at timestamptz")
    op.execute("RESET lock_timeout")


def downgrade() -> None:
    op.execute("SET lock_timeout = '5s'")
    op.execute("ALTER TABLE queues DROP COLUMN IF EXISTS unconsumed_warned_at")
    op.execute("DROP TABLE IF EXISTS processes")
    op.execute("RESET lock_timeout")
