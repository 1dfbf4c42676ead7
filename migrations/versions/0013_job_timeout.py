"""A job's own attempt timeout (`timeout`): resolved at submission from the submission
or its type's handler, so a job runs under the same limit whichever way it came in;
NULL for the service's JOB_TIMEOUT.

Safe on a live table: a nullable column without a default is a catalog change only (no
rewrite, no scan). The ALTER's exclusive lock lasts only for that, and waits for it at
most 50 ms at a time (`_briefly`), so that no statement on `jobs` queues behind it for
longer; after 200 tries it fails: run the migration again once the transaction holding
`jobs` is gone.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04
"""

import runpy
from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# How the locks are taken, written once for every revision (`migrations/locks.py`).
_briefly = runpy.run_path(str(Path(__file__).parents[1] / "locks.py"))["briefly"]


def upgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(_briefly("ALTER TABLE jobs ADD COLUMN IF NOT EXISTS timeout interval"))


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(_briefly("ALTER TABLE jobs DROP COLUMN IF EXISTS timeout"))
