"""The dashboard's rollup (`job_rollup`): per minute and queue, the attempts that
completed, failed and were retried, and how long jobs waited for a worker (a count, a
sum and fixed buckets), added to by every worker process every few seconds, so that the
overview's charts never count `jobs`.

A new table: nothing else is touched, so this is safe on a live database. Its columns
are written out here, not derived from the code: a revision is fixed once released.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BUCKETS = (
    "pickup_10ms",
    "pickup_50ms",
    "pickup_250ms",
    "pickup_1000ms",
    "pickup_5000ms",
    "pickup_30000ms",
    "pickup_120000ms",
    "pickup_600000ms",
    "pickup_3600000ms",
    "pickup_over",
)


def upgrade() -> None:
    op.execute("SET lock_timeout = '5s'")
    counters = "".join(
        f" {name} bigint NOT NULL DEFAULT 0,"
        for name in ("completed", "failed", "retried", "picked", *_BUCKETS)
    )
    op.execute(
        "CREATE TABLE IF NOT EXISTS job_rollup ("
        " minute timestamptz NOT NULL,"
        " queue text NOT NULL,"
        f"{counters}"
        " pickup_seconds double precision NOT NULL DEFAULT 0,"
        " CONSTRAINT pk_job_rollup PRIMARY KEY (minute, queue))"
    )
    op.execute("RESET lock_timeout")


def downgrade() -> None:
    op.execute("SET lock_timeout = '5s'")
    op.execute("DROP TABLE IF EXISTS job_rollup")
    op.execute("RESET lock_timeout")
