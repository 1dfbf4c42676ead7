"""The live processes (`processes`): each worker process's row, refreshed with its
heartbeats, says which queues and types it consumes, so that a queue nobody consumes can
be told from one that is merely busy; and `queues.unconsumed_warned_at`, so that such a
queue is warned of once, by one process.

A new table and a nullable column on `queues` (a small table of queue names): neither
touches `jobs`, so this is safe on a live database. Every claim reads `queues`: the
ALTER tries for its lock 50 ms at a time (`_briefly`), so claims never queue behind it
for longer.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04
"""

import runpy
from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# How the locks are taken, written once for every revision (`migrations/locks.py`).
_briefly = runpy.run_path(str(Path(__file__).parents[1] / "locks.py"))["briefly"]


def upgrade() -> None:
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
    op.execute(
        _briefly("ALTER TABLE queues ADD COLUMN IF NOT EXISTS unconsumed_warned_at timestamptz")
    )


def downgrade() -> None:
    op.execute(_briefly("ALTER TABLE queues DROP COLUMN IF EXISTS unconsumed_warned_at"))
    op.execute("DROP TABLE IF EXISTS processes")
