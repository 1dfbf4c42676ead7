"""Create the jobs table with its hot-path indexes.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE jobs (
            id              uuid        NOT NULL DEFAULT gen_random_uuid(),
            type            text        NOT NULL,
            payload         jsonb       NOT NULL DEFAULT '{}'::jsonb,
            status          text        NOT NULL DEFAULT 'pending',
            attempts        integer     NOT NULL DEFAULT 0,
            max_attempts    integer     NOT NULL,
            run_at          timestamptz NOT NULL DEFAULT now(),
            locked_until    timestamptz,
            lease_token     bigint      NOT NULL DEFAULT 0,
            last_error      text,
            idempotency_key text,
            created_at      timestamptz NOT NULL DEFAULT now(),
            updated_at      timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT pk_jobs PRIMARY KEY (id),
            CONSTRAINT ck_jobs_status CHECK (
                status IN ('pending', 'processing', 'completed', 'failed', 'dead_letter')
            ),
            CONSTRAINT ck_jobs_max_attempts CHECK (max_attempts BETWEEN 1 AND 100),
            CONSTRAINT ck_jobs_attempts CHECK (attempts >= 0),
            CONSTRAINT ck_jobs_lease_while_processing CHECK (
                (status = 'processing') = (locked_until IS NOT NULL)
            )
        )
        """
    )
    # Claims scan due pending jobs in due order; finished rows stay out of this index.
    op.execute("CREATE INDEX ix_jobs_due ON jobs (run_at) WHERE status = 'pending'")
    # Recovery scans leases that may have run out.
    op.execute(
        "CREATE INDEX ix_jobs_lease_expiry ON jobs (locked_until) WHERE status = 'processing'"
    )
    op.execute(
        "CREATE UNIQUE INDEX uq_jobs_idempotency_key ON jobs (idempotency_key) "
        "WHERE idempotency_key IS NOT NULL"
    )


def downgrade() -> None:
    op.execute("DROP TABLE jobs")
