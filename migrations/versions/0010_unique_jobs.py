"""Unique jobs: a key per unique job, the statuses it counts in, and the unique index
that lets one job per key in among those statuses.

Safe on a live table: two nullable columns (a catalog change, in a transaction of its
own, its lock tried 50 ms at a time: `_briefly`), then the index built CONCURRENTLY
outside the migration's transaction; an INVALID index left by an interrupted build is
dropped first, so the migration can simply be run again. No existing job has a key, so
the index starts empty.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _briefly(*statements: str) -> str:
    """`statements` (taking locks on tables every worker reads or writes) as one
    transaction, each lock tried for 50 ms at a time with a pause between: while a lock
    request waits, every statement on its table queues behind it (behind autovacuum for
    `deadlock_timeout`, 1 s, before autovacuum gives way; behind a long transaction for
    as long as it lasts). The session's lock_timeout is put back after."""
    body = ";\n".join(statements)
    return f"""
DO $briefly$
DECLARE
    previous text := current_setting('lock_timeout');
BEGIN
    FOR attempt IN 1..200 LOOP
        BEGIN
            SET LOCAL lock_timeout = '50ms';
            {body};
            PERFORM set_config('lock_timeout', previous, true);
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            PERFORM pg_sleep(0.02 + 0.08 * random());
        END;
    END LOOP;
    RAISE EXCEPTION 'a table stayed locked by others for 200 tries: migrate again later';
END
$briefly$
"""


def upgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(
            _briefly(
                "ALTER TABLE jobs ADD COLUMN IF NOT EXISTS unique_key text,"
                " ADD COLUMN IF NOT EXISTS unique_states text[]"
            )
        )
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS uq_jobs_unique_key")
        op.execute(
            "CREATE UNIQUE INDEX CONCURRENTLY uq_jobs_unique_key ON jobs (unique_key)"
            " WHERE unique_key IS NOT NULL AND status = ANY (unique_states)"
        )


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS uq_jobs_unique_key")
        op.execute(
            _briefly(
                "ALTER TABLE jobs DROP COLUMN IF EXISTS unique_key,"
                " DROP COLUMN IF EXISTS unique_states"
            )
        )
