"""The migrations that bring queues and what a queue holds (0005-0007: queues,
priorities, pauses and attempt history; 0018-0019: queue limits and partition keys),
each run on a filled table while writes with a lock timeout far shorter than a table
rewrite or a blocking index build go on, and each undone."""

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


async def test_queues_and_priorities_arrive_on_a_filled_table_without_blocking_writes(
    empty_database_url: str,
) -> None:
    """0005 adds two columns with constant defaults (no rewrite), CHECKs validated apart
    from the ALTER's lock, and the claim's index CONCURRENTLY: writes with a lock timeout
    far shorter than a table rewrite or a blocking build go on throughout, every existing
    job is in the default queue at priority 0, and it undoes itself."""
    url = empty_database_url
    await asyncio.to_thread(upgrade, url, "0004")
    connection = await asyncpg.connect(dsn(url))
    try:
        written = await _migrate_a_filled_table_while_writing(connection, url, "0005")
        assert written > 0
        placed = await connection.fetch("SELECT queue, priority, count(*) FROM jobs GROUP BY 1, 2")
        assert [tuple(row) for row in placed] == [("default", 0, FILLED_ROWS + written)]
        # The claim's index replaced 0004's.
        assert await _valid_due_indexes(url) == {"ix_jobs_due_by_queue": True}
        checks = await _fetch(
            url,
            "SELECT conname, convalidated FROM pg_constraint WHERE conname = 'ck_jobs_priority'",
        )
        assert checks == [("ck_jobs_priority", True)]
        with pytest.raises(asyncpg.CheckViolationError):
            await connection.execute(
                "INSERT INTO jobs (type, max_attempts, priority) VALUES ('t', 3, 10)"
            )

        await asyncio.to_thread(downgrade, url, "0004")
        assert {"queue", "priority"}.isdisjoint(await asyncio.to_thread(_job_columns, url))
        assert await _valid_due_indexes(url) == {"ix_jobs_due_key": True}
        await asyncio.to_thread(upgrade, url)
        assert await asyncio.to_thread(_drift, url, metadata) == []
    finally:
        await connection.close()


async def test_pauses_and_attempt_history_arrive_on_a_filled_table_without_blocking_writes(
    empty_database_url: str,
) -> None:
    """0006 creates a table, 0007 adds nullable columns without defaults (a catalog
    change, no rewrite): writes with a lock timeout far shorter than a rewrite go on, old
    jobs read as having no history, and both undo themselves."""
    url = empty_database_url
    await asyncio.to_thread(upgrade, url, "0005")
    connection = await asyncpg.connect(dsn(url))
    try:
        written = await _migrate_a_filled_table_while_writing(connection, url, "0007")
        assert written > 0
        empty = await connection.fetchval(
            "SELECT count(*) FROM jobs"
            " WHERE started_at IS NULL AND worker IS NULL AND attempt_log IS NULL"
        )
        assert empty == FILLED_ROWS + written
        assert await connection.fetchval("SELECT count(*) FROM queues") == 0

        await asyncio.to_thread(downgrade, url, "0005")
        columns = await asyncio.to_thread(_job_columns, url)
        assert {"started_at", "worker", "attempt_log"}.isdisjoint(columns)
        assert await connection.fetchval("SELECT to_regclass('queues')") is None
        await asyncio.to_thread(upgrade, url)
        assert await asyncio.to_thread(_drift, url, metadata) == []
    finally:
        await connection.close()


async def test_queue_limits_arrive_on_a_filled_table_without_blocking_writes(
    empty_database_url: str,
) -> None:
    """0018 adds columns to `queues` (a catalog change) and builds the running jobs' index
    CONCURRENTLY, while writes with a short lock timeout go on; a limit then holds, and
    the downgrade takes both away, losing no job."""
    url = empty_database_url
    await asyncio.to_thread(upgrade, url, "0017")
    connection = await asyncpg.connect(dsn(url))
    try:
        written = await _migrate_a_filled_table_while_writing(connection, url, "0018")
        assert written > 0
        [(valid,)] = await _fetch(
            url,
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
            " WHERE c.relname = 'ix_jobs_running_by_queue'",
        )
        assert valid
        await connection.execute("INSERT INTO queues (name, concurrency) VALUES ('q', 2)")
        with pytest.raises(asyncpg.CheckViolationError):
            await connection.execute("UPDATE queues SET rate_limit = 5 WHERE name = 'q'")

        await asyncio.to_thread(downgrade, url, "0017")
        assert "ix_jobs_running_by_queue" not in await asyncio.to_thread(_job_indexes, url)
        columns = await _fetch(
            url,
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'queues'",
        )
        assert "concurrency" not in {name for (name,) in columns}
        assert await connection.fetchval("SELECT count(*) FROM jobs") == FILLED_ROWS + written
        await asyncio.to_thread(upgrade, url)
        assert await asyncio.to_thread(_drift, url, metadata) == []
    finally:
        await connection.close()


async def test_partition_keys_arrive_on_a_filled_table_without_blocking_writes(
    empty_database_url: str,
) -> None:
    """0019 adds a nullable column to `jobs` and one to `queues` (catalog changes) and
    builds two partial indexes CONCURRENTLY, while writes with a short lock timeout go
    on; a per-key limit's check then holds, and the downgrade takes it all away, losing
    no job."""
    url = empty_database_url
    await asyncio.to_thread(upgrade, url, "0018")
    connection = await asyncpg.connect(dsn(url))
    try:
        written = await _migrate_a_filled_table_while_writing(connection, url, "0019")
        assert written > 0
        indexes = {"ix_jobs_due_by_partition", "ix_jobs_running_by_partition"}
        valid = await _fetch(
            url,
            "SELECT c.relname, i.indisvalid FROM pg_index i"
            " JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname LIKE '%by_partition'",
        )
        assert dict(valid) == dict.fromkeys(indexes, True)
        with pytest.raises(asyncpg.CheckViolationError):
            await connection.execute("INSERT INTO queues (name, key_concurrency) VALUES ('q', 0)")

        await asyncio.to_thread(downgrade, url, "0018")
        assert not indexes & await asyncio.to_thread(_job_indexes, url)
        assert "partition_key" not in await asyncio.to_thread(_job_columns, url)
        assert await connection.fetchval("SELECT count(*) FROM jobs") == FILLED_ROWS + written
        await asyncio.to_thread(upgrade, url)
        assert await asyncio.to_thread(_drift, url, metadata) == []
    finally:
        await connection.close()
