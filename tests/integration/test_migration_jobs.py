"""The migrations of `jobs`' indexes, states and options, and of the tables beside it
(0004, 0008-0014), each run on a filled table while writes with a lock timeout far
shorter than a table rewrite or a blocking index build go on, and each undone."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from jobqueue.adapters.postgres.migrations import downgrade, upgrade
from jobqueue.adapters.postgres.schema import metadata
from tests.support.migrating import (
    FILLED_ROWS,
    _drift,
    _fetch,
    _job_columns,
    _job_indexes,
    _migrate_a_filled_table_while_writing,
    _valid_due_indexes,
)
from tests.support.postgres import dsn


async def test_the_keyed_due_index_replaces_the_old_one_on_a_filled_table_without_blocking(
    empty_database_url: str,
) -> None:
    """0004 builds and drops indexes CONCURRENTLY: on a filled table, writes go on while
    it runs (each with a lock timeout far shorter than a blocking build), and it undoes
    itself."""
    url = empty_database_url
    await asyncio.to_thread(upgrade, url, "0003")
    connection = await asyncpg.connect(dsn(url))
    try:
        written = await _migrate_a_filled_table_while_writing(connection, url, "0004")
        assert written > 0
        assert await _valid_due_indexes(url) == {"ix_jobs_due_key": True}
        assert await _fetch(url, "SELECT version_num FROM alembic_version") == [("0004",)]
        assert await connection.fetchval("SELECT count(*) FROM jobs") == FILLED_ROWS + written

        await asyncio.to_thread(downgrade, url, "0003")
        assert await _valid_due_indexes(url) == {"ix_jobs_due": True}
        await asyncio.to_thread(upgrade, url)
        assert await asyncio.to_thread(_drift, url, metadata) == []
    finally:
        await connection.close()


async def test_finished_jobs_are_indexed_by_type_on_a_filled_table_without_blocking_writes(
    empty_database_url: str,
) -> None:
    """0008 builds the typed index and drops the old one CONCURRENTLY: writes with a lock
    timeout far shorter than a blocking build go on, and it undoes itself."""
    url = empty_database_url
    await asyncio.to_thread(upgrade, url, "0007")
    connection = await asyncpg.connect(dsn(url))
    try:
        written = await _migrate_a_filled_table_while_writing(connection, url, "0008")
        assert written > 0
        finished = await _fetch(
            url,
            "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c"
            " ON c.oid = i.indexrelid WHERE c.relname LIKE 'ix_jobs_finished%'",
        )
        assert finished == [("ix_jobs_finished_by_type", True)]

        await asyncio.to_thread(downgrade, url, "0007")
        assert "ix_jobs_finished" in await asyncio.to_thread(_job_indexes, url)
        await asyncio.to_thread(upgrade, url)
        assert await asyncio.to_thread(_drift, url, metadata) == []
    finally:
        await connection.close()


async def test_cancel_and_snooze_arrive_on_a_filled_table_without_blocking_writes(
    empty_database_url: str,
) -> None:
    """0009 adds `snoozes`, lets the status CHECK take `cancelled` (NOT VALID, then
    validated) and builds its index CONCURRENTLY: writes with a short lock timeout go on.
    Its downgrade turns cancelled jobs into failed ones, which 0008 knows."""
    url = empty_database_url
    await asyncio.to_thread(upgrade, url, "0008")
    connection = await asyncpg.connect(dsn(url))
    try:
        written = await _migrate_a_filled_table_while_writing(connection, url, "0009")
        assert written > 0
        assert await connection.fetchval("SELECT count(*) FROM jobs WHERE snoozes = 0") == (
            FILLED_ROWS + written
        )
        valid = await _fetch(
            url,
            "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c"
            " ON c.oid = i.indexrelid WHERE c.relname = 'ix_jobs_cancelled'",
        )
        assert valid == [("ix_jobs_cancelled", True)]
        checks = await _fetch(
            url,
            "SELECT conname, convalidated FROM pg_constraint"
            " WHERE conname IN ('ck_jobs_status', 'ck_jobs_snoozes') ORDER BY conname",
        )
        assert checks == [("ck_jobs_snoozes", True), ("ck_jobs_status", True)]
        await connection.execute(
            "UPDATE jobs SET status = 'cancelled'"
            " WHERE id IN (SELECT id FROM jobs WHERE status = 'pending' LIMIT 3)"
        )

        await asyncio.to_thread(downgrade, url, "0008")
        assert "snoozes" not in await asyncio.to_thread(_job_columns, url)
        assert "ix_jobs_cancelled" not in await asyncio.to_thread(_job_indexes, url)
        assert await connection.fetchval("SELECT count(*) FROM jobs WHERE status = 'failed'") == 3
        with pytest.raises(asyncpg.CheckViolationError):
            await connection.execute(
                "UPDATE jobs SET status = 'cancelled'"
                " WHERE id = (SELECT id FROM jobs WHERE status = 'failed' LIMIT 1)"
            )
        await asyncio.to_thread(upgrade, url)
        assert await asyncio.to_thread(_drift, url, metadata) == []
    finally:
        await connection.close()


async def test_unique_jobs_arrive_on_a_filled_table_without_blocking_writes(
    empty_database_url: str,
) -> None:
    """0010 adds two nullable columns and builds the unique index CONCURRENTLY: writes
    with a short lock timeout go on, and it undoes itself."""
    url = empty_database_url
    await asyncio.to_thread(upgrade, url, "0009")
    connection = await asyncpg.connect(dsn(url))
    try:
        written = await _migrate_a_filled_table_while_writing(connection, url, "0010")
        assert written > 0
        valid = await _fetch(
            url,
            "SELECT c.relname, i.indisvalid, i.indisunique FROM pg_index i JOIN pg_class c"
            " ON c.oid = i.indexrelid WHERE c.relname = 'uq_jobs_unique_key'",
        )
        assert valid == [("uq_jobs_unique_key", True, True)]
        insert = (
            "INSERT INTO jobs (type, max_attempts, unique_key, unique_states)"
            " VALUES ('t', 3, 'k', ARRAY['pending', 'processing'])"
        )
        await connection.execute(insert)
        with pytest.raises(asyncpg.UniqueViolationError):
            await connection.execute(insert)

        await asyncio.to_thread(downgrade, url, "0009")
        assert {"unique_key", "unique_states"}.isdisjoint(
            await asyncio.to_thread(_job_columns, url)
        )
        await asyncio.to_thread(upgrade, url)
        assert await asyncio.to_thread(_drift, url, metadata) == []
    finally:
        await connection.close()


async def test_published_job_types_arrive_on_a_filled_table_without_blocking_writes(
    empty_database_url: str,
) -> None:
    """0011 creates a table of its own: writes to `jobs` with a short lock timeout go on,
    and it undoes itself."""
    url = empty_database_url
    await asyncio.to_thread(upgrade, url, "0010")
    connection = await asyncpg.connect(dsn(url))
    try:
        written = await _migrate_a_filled_table_while_writing(connection, url, "0011")
        assert written > 0
        await connection.execute(
            "INSERT INTO job_types (name, options, published_by) VALUES ('t', '{}', 'w')"
        )
        with pytest.raises(asyncpg.UniqueViolationError):
            await connection.execute(
                "INSERT INTO job_types (name, options, published_by) VALUES ('t', '{}', 'v')"
            )

        await asyncio.to_thread(downgrade, url, "0010")
        assert await connection.fetchval("SELECT to_regclass('job_types')") is None
        assert await connection.fetchval("SELECT count(*) FROM jobs") == FILLED_ROWS + written
        await asyncio.to_thread(upgrade, url)
        assert await asyncio.to_thread(_drift, url, metadata) == []
    finally:
        await connection.close()


async def test_claims_by_type_timeouts_and_periodic_slots_arrive_on_a_filled_table(
    empty_database_url: str,
) -> None:
    """0012 builds the claim's index by type and drops the old one CONCURRENTLY, 0013 adds
    a nullable column without a default (a catalog change), 0014 creates a table: writes
    with a lock timeout far shorter than a blocking build or a rewrite go on throughout,
    and all three undo themselves."""
    url = empty_database_url
    await asyncio.to_thread(upgrade, url, "0011")
    connection = await asyncpg.connect(dsn(url))
    try:
        written = await _migrate_a_filled_table_while_writing(connection, url, "0014")
        assert written > 0
        assert await _valid_due_indexes(url) == {"ix_jobs_due_by_type": True}
        assert await connection.fetchval("SELECT count(*) FROM jobs WHERE timeout IS NULL") == (
            FILLED_ROWS + written
        )
        assert await connection.fetchval("SELECT count(*) FROM periodic_slots") == 0

        await asyncio.to_thread(downgrade, url, "0011")
        assert await _valid_due_indexes(url) == {"ix_jobs_due_by_queue": True}
        assert "timeout" not in await asyncio.to_thread(_job_columns, url)
        assert await connection.fetchval("SELECT to_regclass('periodic_slots')") is None
        assert await connection.fetchval("SELECT count(*) FROM jobs") == FILLED_ROWS + written
        await asyncio.to_thread(upgrade, url)
        assert await asyncio.to_thread(_drift, url, metadata) == []
    finally:
        await connection.close()
