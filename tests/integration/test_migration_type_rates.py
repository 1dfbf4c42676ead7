"""Migration 0022 (rates per job type) on a filled `jobs` table while writes go on: it
adds a column to `queues` and a table, so writes to `jobs` never wait; its checks hold,
a type's turn and its window answer, a second claim finds the turn taken, and the
downgrade takes it all away, losing no job."""

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

_TURN = "SELECT * FROM jobqueue_type_turn('q', 'sms')"


async def test_type_rates_arrive_on_a_filled_table_without_blocking_writes(
    empty_database_url: str,
) -> None:
    url = empty_database_url
    await asyncio.to_thread(upgrade, url, "0021")
    connection = await asyncpg.connect(dsn(url))
    other = await asyncpg.connect(dsn(url))
    try:
        written = await _migrate_a_filled_table_while_writing(connection, url, "0022")
        assert written > 0
        assert await connection.fetchval("SELECT bool_or(type_rated) FROM queues") in (None, False)
        with pytest.raises(asyncpg.CheckViolationError):
            await connection.execute(
                "INSERT INTO type_rates (queue, type, rate_limit, rate_period)"
                " VALUES ('q', 'sms', 0, interval '1 minute')"
            )
        await connection.execute(
            "INSERT INTO type_rates (queue, type, rate_limit, rate_period)"
            " VALUES ('q', 'sms', 2, interval '1 minute')"
        )
        async with connection.transaction():
            turn = await connection.fetchrow(_TURN)
            assert turn["slots"] == 2
            # Another claim meanwhile finds the turn taken: no slots, no stamp.
            taken = await other.fetchrow(_TURN)
            assert (taken["slots"], taken["stamp"]) == (0, None)
            await connection.execute(
                "SELECT jobqueue_record_type_starts('q', 'sms', $1, 2)", turn["stamp"]
            )
        again = await connection.fetchrow(_TURN)
        assert again["slots"] == 0
        assert 0 < again["opens_in"].total_seconds() <= 60
        # A type without a rate has no cap.
        unrated = await connection.fetchrow("SELECT * FROM jobqueue_type_turn('q', 'fax')")
        assert (unrated["slots"], unrated["stamp"]) == (None, None)

        await asyncio.to_thread(downgrade, url, "0021")
        tables = await _fetch(url, "SELECT tablename FROM pg_tables WHERE tablename = 'type_rates'")
        assert tables == []
        columns = await _fetch(
            url,
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'queues'",
        )
        assert "type_rated" not in {name for (name,) in columns}
        assert await connection.fetchval("SELECT count(*) FROM jobs") == FILLED_ROWS + written
        await asyncio.to_thread(upgrade, url)
        assert await asyncio.to_thread(_drift, url, metadata) == []
    finally:
        await other.close()
        await connection.close()
