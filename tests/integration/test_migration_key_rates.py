"""Migration 0021 (rates per partition key) on a filled `jobs` table while writes go on:
it touches `queues` and adds a table, so writes to `jobs` never wait; its checks hold,
its functions answer, and the downgrade takes it all away, losing no job."""

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
    _migrate_a_filled_table_while_writing,
)
from tests.support.postgres import dsn


async def test_key_rates_arrive_on_a_filled_table_without_blocking_writes(
    empty_database_url: str,
) -> None:
    url = empty_database_url
    await asyncio.to_thread(upgrade, url, "0020")
    connection = await asyncpg.connect(dsn(url))
    try:
        written = await _migrate_a_filled_table_while_writing(connection, url, "0021")
        assert written > 0
        with pytest.raises(asyncpg.CheckViolationError):
            await connection.execute("INSERT INTO queues (name, key_rate_limit) VALUES ('q', 5)")
        await connection.execute(
            "INSERT INTO queues (name, key_rate_limit, key_rate_period)"
            " VALUES ('q', 2, interval '1 minute')"
        )
        async with connection.transaction():
            turn = await connection.fetchrow(
                "SELECT * FROM jobqueue_key_turn('q', 'a', '{}', NULL, 2, interval '1 minute')"
            )
            assert (turn["slots"], turn["rate_left"]) == (2, 2)
            await connection.execute(
                "SELECT jobqueue_record_key_starts('q', 'a', interval '1 minute', $1, 2)",
                turn["stamp"],
            )
        again = await connection.fetchrow(
            "SELECT * FROM jobqueue_key_turn('q', 'a', '{}', NULL, 2, interval '1 minute')"
        )
        assert (again["slots"], again["rate_left"]) == (0, 0)

        await asyncio.to_thread(downgrade, url, "0020")
        tables = await _fetch(url, "SELECT tablename FROM pg_tables WHERE tablename = 'key_starts'")
        assert tables == []
        columns = await _fetch(
            url,
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'queues'",
        )
        assert not {"key_rate_limit", "key_rate_period"} & {name for (name,) in columns}
        assert await connection.fetchval("SELECT count(*) FROM jobs") == FILLED_ROWS + written
        await asyncio.to_thread(upgrade, url)
        assert await asyncio.to_thread(_drift, url, metadata) == []
    finally:
        await connection.close()
