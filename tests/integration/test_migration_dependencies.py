"""Migration 0024 (dependencies and workflows) on a filled `jobs` table while writes go on:
its columns, table, functions and triggers are catalog changes, its status CHECK is
validated under a lock that lets writes pass and its indexes are built CONCURRENTLY, so
inserts, endings and deletes wait for catalog changes only, never for a read of the
table (a monitor watches the locks the migration holds); the release then works on the
old table's rows; the downgrade refuses while a job waits, and otherwise takes it all
away, while writes go on, losing no job."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

import asyncpg
import pytest
from sqlalchemy.exc import DBAPIError

from jobqueue.adapters.postgres.migrations import downgrade, upgrade
from jobqueue.adapters.postgres.schema import metadata
from tests.support.dependency_migrations import TRIGGERS_0023, TRIGGERS_0024, _insert
from tests.support.migrating import (
    ENDED,
    FILLED_ROWS,
    _drift,
    _fetch,
    _fill,
    _job_columns,
    _migrate_while_writing,
    _triggers,
)
from tests.support.postgres import dsn

COLUMNS = {"depends_on", "run_anyway", "workflow_id", "waiting_for", "has_dependents"}
INDEXES = {
    "ix_jobs_waiting": "USING btree (run_at) WHERE (status = 'waiting'::text)",
    "ix_jobs_workflow": "USING btree (workflow_id, created_at, id) WHERE (workflow_id IS NOT NULL)",
}
FUNCTIONS = {"jobqueue_note_ending", "jobqueue_release_dependents"}

_INDEXES = (
    "SELECT c.relname, i.indisvalid, i.indisready, pg_get_indexdef(i.indexrelid),"
    " pg_relation_size(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
    " WHERE c.relname IN ('ix_jobs_waiting', 'ix_jobs_workflow')"
)
_STATUS_CHECK = (
    "SELECT convalidated, pg_get_constraintdef(oid) FROM pg_constraint"
    " WHERE conname = 'ck_jobs_status'"
)
_FUNCTIONS = "SELECT proname FROM pg_proc WHERE proname LIKE 'jobqueue_%'"


async def _status(connection: asyncpg.Connection, job_id: UUID) -> asyncpg.Record:
    row = await connection.fetchrow(
        "SELECT status, waiting_for, run_at, last_error FROM jobs WHERE id = $1", job_id
    )
    assert row is not None
    return row


async def _wait_for(connection: asyncpg.Connection, dependency: UUID, **columns: Any) -> UUID:
    """A job waiting for `dependency` and its edge, written by SQL as a graph's insert
    writes them (`dependency` marked as MARK_DEPENDENCIES marks it)."""
    await connection.execute("UPDATE jobs SET has_dependents = true WHERE id = $1", dependency)
    job_id = await _insert(connection, "waiting", depends_on=[dependency], waiting_for=1, **columns)
    await connection.execute("INSERT INTO job_dependencies VALUES ($1, $2)", dependency, job_id)
    return job_id


async def test_dependencies_arrive_on_a_filled_table_without_blocking_writes(
    empty_database_url: str,
) -> None:
    url = empty_database_url
    await asyncio.to_thread(upgrade, url, "0023")
    connection = await asyncpg.connect(dsn(url))
    listening = await asyncpg.connect(dsn(url))
    woken: asyncio.Queue[str] = asyncio.Queue()
    ended: asyncio.Queue[str] = asyncio.Queue()
    try:
        ids = await _fill(connection)
        # An old pending job, not the ending writer's, to depend on once migrated.
        old = await connection.fetchval(
            "SELECT id FROM jobs WHERE status = 'pending' ORDER BY id DESC LIMIT 1"
        )
        up = await _migrate_while_writing(url, "upgrade", "0024", ids, connection, listening)
        total = FILLED_ROWS + up.inserted - up.deleted

        assert await asyncio.to_thread(_job_columns, url) >= COLUMNS
        untouched = await connection.fetchval(
            "SELECT count(*) FROM jobs WHERE depends_on IS NULL AND workflow_id IS NULL"
            " AND NOT run_anyway AND waiting_for = 0 AND NOT has_dependents"
        )
        assert untouched == total
        edges = await _fetch(
            url,
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
            # Not-null constraints are rows of their own on PostgreSQL 18.
            " WHERE conrelid = 'job_dependencies'::regclass AND contype <> 'n'",
        )
        assert edges == [("pk_job_dependencies", "PRIMARY KEY (depends_on, job_id)")]
        # Valid, ready, as declared, and holding no entry: no job waits or is in a workflow.
        indexes = await _fetch(url, _INDEXES)
        assert {name: (valid, ready) for name, valid, ready, _, _ in indexes} == dict.fromkeys(
            INDEXES, (True, True)
        )
        assert {name: d[d.index("USING") :] for name, _, _, d, _ in indexes} == INDEXES
        assert all(size <= 8192 for *_, size in indexes), indexes
        [(validated, check)] = await _fetch(url, _STATUS_CHECK)
        assert (validated, "'waiting'" in check) == (True, True), check
        assert {name for (name,) in await _fetch(url, _FUNCTIONS)} >= FUNCTIONS
        triggers = await _triggers(url)
        assert set(triggers) == TRIGGERS_0024
        assert {enabled for enabled, _ in triggers.values()} == {"O"}
        assert "'waiting'" in triggers["jobs_announce_ending"][1]

        await listening.add_listener("jobqueue_jobs", lambda *args: woken.put_nowait(args[3]))
        await listening.add_listener("jobqueue_endings", lambda *args: ended.put_nowait(args[3]))
        # The old job ends: the new one waiting for it is pending, due now (not an
        # hour ago), its edge gone, the workers woken; watched, it is not announced
        # (pending is no end).
        released = await _wait_for(
            connection,
            old,
            run_at=await connection.fetchval("SELECT now() - interval '1 hour'"),
            watched=True,
        )
        await connection.execute("UPDATE jobs SET status = 'completed' WHERE id = $1", old)
        row = await _status(connection, released)
        assert (row["status"], row["waiting_for"]) == ("pending", 0)
        assert row["run_at"] >= await connection.fetchval("SELECT now() - interval '1 minute'")
        async with asyncio.timeout(10):
            await woken.get()
        # A dependency that fails cancels its watched dependent, which is announced.
        failing = await _insert(connection, "pending")
        cancelled = await _wait_for(connection, failing, watched=True)
        await connection.execute("UPDATE jobs SET status = 'failed' WHERE id = $1", failing)
        row = await _status(connection, cancelled)
        assert row["status"] == "cancelled"
        assert row["last_error"] == f"job {failing} it depends on ended failed"
        async with asyncio.timeout(10):
            assert await ended.get() == str(cancelled)
        assert ended.empty()
        assert await connection.fetchval("SELECT count(*) FROM job_dependencies") == 0
        total += 3

        # 0023 has no status for a waiting job: the downgrade refuses, and changes nothing.
        waiting = await _wait_for(connection, await _insert(connection, "pending"))
        total += 2
        with pytest.raises(DBAPIError, match="jobs are waiting for their dependencies"):
            await asyncio.to_thread(downgrade, url, "0023")
        assert await _fetch(url, "SELECT version_num FROM alembic_version") == [("0024",)]
        assert await asyncio.to_thread(_job_columns, url) >= COLUMNS
        assert set(await _triggers(url)) == TRIGGERS_0024

        await connection.execute("UPDATE jobs SET status = 'cancelled' WHERE id = $1", waiting)
        ids = [
            row["id"]
            for row in await connection.fetch(
                "SELECT id FROM jobs WHERE status = 'pending' AND type = 't' ORDER BY id LIMIT $1",
                ENDED,
            )
        ]
        down = await _migrate_while_writing(url, "downgrade", "0023", ids, connection, listening)
        total += down.inserted - down.deleted

        assert COLUMNS.isdisjoint(await asyncio.to_thread(_job_columns, url))
        assert await connection.fetchval("SELECT to_regclass('job_dependencies')") is None
        assert await _fetch(url, _INDEXES) == []
        assert FUNCTIONS.isdisjoint(name for (name,) in await _fetch(url, _FUNCTIONS))
        triggers = await _triggers(url)
        assert set(triggers) == TRIGGERS_0023
        assert "'waiting'" not in triggers["jobs_announce_ending"][1]
        [(validated, check)] = await _fetch(url, _STATUS_CHECK)
        assert (validated, "'waiting'" in check) == (True, False), check
        with pytest.raises(asyncpg.CheckViolationError):
            await _insert(connection, "waiting")
        assert await connection.fetchval("SELECT count(*) FROM jobs") == total

        await asyncio.to_thread(upgrade, url)
        assert await asyncio.to_thread(_drift, url, metadata) == []
    finally:
        await listening.close()
        await connection.close()
