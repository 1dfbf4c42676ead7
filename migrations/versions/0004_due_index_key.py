"""The due index keyed by `(run_at, id)`, so that a claim can resume where the last ended.

A claim that always scans the due index from its start must step over the entry of
every job claimed since the last vacuum, and cannot mark them dead while a long
transaction holds back the xmin horizon: measured, the entries each claim read grew from
20 to 60,000 over a 60 s hold, and the drain fell by 60-75 %. With `id` in the key, the
claim starts after the last job it claimed (`adapters/postgres/store.py`), past those
entries; the same order also serves listing pending jobs, which sorts by `(run_at, id)`.

Safe on a live table: both indexes are built and dropped CONCURRENTLY, outside the
migration's transaction (Alembic's autocommit block), so submissions, claims and
outcome writes go on throughout. The old index serves claims until the new one is valid.
A build interrupted midway leaves an INVALID index behind: `IF NOT EXISTS` would then
skip it, so it is dropped first.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    _replace(
        old="ix_jobs_due",
        new="ix_jobs_due_key",
        definition="ON jobs (run_at, id) WHERE status = 'pending'",
    )


def downgrade() -> None:
    _replace(
        old="ix_jobs_due_key",
        new="ix_jobs_due",
        definition="ON jobs (run_at) WHERE status = 'pending'",
    )


def _replace(*, old: str, new: str, definition: str) -> None:
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {new}")
        op.execute(f"CREATE INDEX CONCURRENTLY {new} {definition}")
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {old}")
