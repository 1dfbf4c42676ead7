"""Flow control: a queue's limits and what its claims leave for each other.

`queues` gains the limits (concurrency; a rate as starts per period), who set them, and
the claim's bookkeeping (`adapters/postgres/queries/flow.py`): `holder_*`, the jobs the
latest claims took; `starts` and `start_counts`, the starts within the rate's window.
`jobs` gains a small partial index of the running jobs by queue, in which a limited
queue's claim counts its slots.

Safe on a live table: `queues` is a row per paused or limited queue, and columns with a
constant default or none are a catalog change; the index is built CONCURRENTLY (an
INVALID one left by an interrupted build is dropped first). Downgrading drops both.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04
"""

from collections.abc import Sequence

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
    "holder_ids uuid[] NOT NULL DEFAULT '{}'",
    "holder_tokens bigint[] NOT NULL DEFAULT '{}'",
    "holder_at timestamptz[] NOT NULL DEFAULT '{}'",
    "starts timestamptz[] NOT NULL DEFAULT '{}'",
    "start_counts integer[] NOT NULL DEFAULT '{}'",
)
_NAMES = (
    "concurrency",
    "rate_limit",
    "rate_period",
    "limits_source",
    "holder_ids",
    "holder_tokens",
    "holder_at",
    "starts",
    "start_counts",
)


def upgrade() -> None:
    op.execute("SET lock_timeout = '5s'")
    op.execute(
        "ALTER TABLE queues "
        + ", ".join(f"ADD COLUMN IF NOT EXISTS {column}" for column in _COLUMNS)
        + ", ADD CONSTRAINT ck_queues_rate"
        " CHECK ((rate_limit IS NULL) = (rate_period IS NULL))"
    )
    op.execute("RESET lock_timeout")
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_jobs_running_by_queue")
        op.execute(
            "CREATE INDEX CONCURRENTLY ix_jobs_running_by_queue"
            " ON jobs (queue, locked_until) WHERE status = 'processing'"
        )


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_jobs_running_by_queue")
    op.execute("SET lock_timeout = '5s'")
    op.execute(
        "ALTER TABLE queues DROP CONSTRAINT IF EXISTS ck_queues_rate, "
        + ", ".join(f"DROP COLUMN IF EXISTS {name}" for name in _NAMES)
    )
    op.execute("RESET lock_timeout")
