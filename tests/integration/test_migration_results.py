"""Migration 0023 (results, progress, watched endings) on a filled `jobs` table while
writes go on: its columns and triggers are catalog changes, so writes never wait; a
watched job's end and delete are announced, an unwatched one's not; the downgrade takes
it all away, losing no job."""

from __future__ import annotations

import asyncio

import asyncpg

from jobqueue.adapters.postgres.migrations import downgrade, upgrade
from jobqueue.adapters.postgres.schema import metadata
from tests.support.migrating import (
    FILLED_ROWS,
    _drift,
    _fetch,
    _job_columns,
    _migrate_a_filled_table_while_writing,
)
from tests.support.postgres import dsn

_TRIGGERS = "SELECT tgname FROM pg_trigger WHERE tgrelid = 'jobs'::regclass AND NOT tgisinternal"


async def test_results_and_watched_endings_arrive_on_a_filled_table_without_blocking_writes(
    empty_database_url: str,
) -> None:
    url = empty_database_url
    await asyncio.to_thread(upgrade, url, "0022")
    connection = await asyncpg.connect(dsn(url))
    listening = await asyncpg.connect(dsn(url))
    heard: asyncio.Queue[str] = asyncio.Queue()
    try:
        written = await _migrate_a_filled_table_while_writing(connection, url, "0023")
        assert written > 0
        assert {"result", "progress", "watched"} <= await asyncio.to_thread(_job_columns, url)
        await listening.add_listener("jobqueue_endings", lambda *args: heard.put_nowait(args[3]))

        ids = [
            row["id"]
            for row in await connection.fetch(
                "SELECT id FROM jobs WHERE status = 'pending' ORDER BY id LIMIT 3"
            )
        ]
        unwatched, watched, deleted = ids
        await connection.execute(
            "UPDATE jobs SET watched = true WHERE id = ANY($1::uuid[])", [watched, deleted]
        )
        # Back to pending is no end; completed, for the unwatched one, is not announced.
        await connection.execute("UPDATE jobs SET status = 'pending' WHERE id = $1", watched)
        await connection.execute("UPDATE jobs SET status = 'completed' WHERE id = $1", unwatched)
        await connection.execute(
            "UPDATE jobs SET status = 'completed', result = '{\"n\": 1}' WHERE id = $1", watched
        )
        await connection.execute("DELETE FROM jobs WHERE id = $1", deleted)
        async with asyncio.timeout(10):
            assert [await heard.get(), await heard.get()] == [str(watched), str(deleted)]
        assert heard.empty()

        await asyncio.to_thread(downgrade, url, "0022")
        assert {"result", "progress", "watched"}.isdisjoint(
            await asyncio.to_thread(_job_columns, url)
        )
        assert await _fetch(url, _TRIGGERS) == []
        functions = await _fetch(
            url, "SELECT proname FROM pg_proc WHERE proname = 'jobqueue_announce_ending'"
        )
        assert functions == []
        assert await connection.fetchval("SELECT count(*) FROM jobs") == FILLED_ROWS + written - 1
        await asyncio.to_thread(upgrade, url)
        assert {name for (name,) in await _fetch(url, _TRIGGERS)} >= {
            "jobs_announce_ending",
            "jobs_announce_deleted",
        }
        assert await asyncio.to_thread(_drift, url, metadata) == []
    finally:
        await listening.close()
        await connection.close()
