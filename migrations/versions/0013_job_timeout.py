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

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
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
        op.execute(_briefly("ALTER TABLE jobs ADD COLUMN IF NOT EXISTS timeout interval"))


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(_briefly("ALTER TABLE jobs DROP COLUMN IF EXISTS timeout"))
