"""Flow control: a queue's limits and what its claims leave for each other.

`queues` gains the limits (concurrency; a rate as starts per period), who set them, and
the starts within the rate's window (`starts`, `start_counts`). `jobs` gains a small
partial index of the running jobs by queue, in which a limited queue's claim counts its
slots, through `jobqueue_running_jobs`: a VOLATILE SQL function, so that its query runs
with a snapshot of its own, taken after the claim locked the queue's row
(`adapters/postgres/queries/flow.py` says why).

Safe on a live table: `queues` is a row per paused or limited queue, and columns with a
constant default or none are a catalog change (its lock, which every claim would queue
behind, tried 50 ms at a time: `_briefly`); the index is built CONCURRENTLY (an
INVALID one left by an interrupted build is dropped first). Downgrading drops all three.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04
"""

import runpy
from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out, not imported: a revision must keep meaning what it meant when written.
_COLUMNS = (
    "concurrency integer CONSTRAINT ck_queues_concurrency CHECK (concurrency BETWEEN 1 AND 10000)",
    "rate_limit integer CONSTRAINT ck_queues_rate_limit CHECK (rate_limit BETWEEN 1 AND 10000)",
    "rate_period interval CONSTRAINT ck_queues_rate_period"
    " CHECK (rate_period BETWEEN interval '100 milliseconds' AND interval '24 hours')",
    "limits_source text CONSTRAINT ck_queues_limits_source"
    " CHECK (limits_source IN ('settings', 'operator'))",
    "starts timestamptz[] NOT NULL DEFAULT '{}'",
    "start_counts integer[] NOT NULL DEFAULT '{}'",
)
_NAMES = (
    "concurrency",
    "rate_limit",
    "rate_period",
    "limits_source",
    "starts",
    "start_counts",
)


# The running jobs of `queue` but those in `ending`, counted up to `cap`. STRICT: a queue
# without a concurrency limit (a NULL cap) counts nothing.
_RUNNING_JOBS = """
CREATE OR REPLACE FUNCTION jobqueue_running_jobs(queue text, ending uuid[], cap integer)
RETURNS integer
LANGUAGE sql VOLATILE STRICT
AS $$
    SELECT CAST(count(*) AS integer) FROM (
        SELECT FROM jobs
        WHERE jobs.queue = jobqueue_running_jobs.queue
          AND jobs.status = 'processing'
          AND NOT (jobs.id = ANY (jobqueue_running_jobs.ending))
        LIMIT jobqueue_running_jobs.cap
    ) AS running
$$
"""


# How the locks are taken, written once for every revision (`migrations/locks.py`).
_briefly = runpy.run_path(str(Path(__file__).parents[1] / "locks.py"))["briefly"]


def upgrade() -> None:
    op.execute(
        _briefly(
            "ALTER TABLE queues "
            + ", ".join(f"ADD COLUMN IF NOT EXISTS {column}" for column in _COLUMNS)
            + ", ADD CONSTRAINT ck_queues_rate"
            " CHECK ((rate_limit IS NULL) = (rate_period IS NULL))"
        )
    )
    op.execute(_RUNNING_JOBS)
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_jobs_running_by_queue")
        op.execute(
            "CREATE INDEX CONCURRENTLY ix_jobs_running_by_queue"
            " ON jobs (queue, locked_until) WHERE status = 'processing'"
        )


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_jobs_running_by_queue")
    op.execute("DROP FUNCTION IF EXISTS jobqueue_running_jobs(text, uuid[], integer)")
    op.execute(
        _briefly(
            "ALTER TABLE queues DROP CONSTRAINT IF EXISTS ck_queues_rate, "
            + ", ".join(f"DROP COLUMN IF EXISTS {name}" for name in _NAMES)
        )
    )
