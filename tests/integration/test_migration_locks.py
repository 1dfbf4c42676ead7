"""A migration's change to `jobs` behind a long transaction: each revision tries its lock
50 ms at a time (`_briefly`), so writes never queue behind the waiting ALTER for longer,
and the migration completes once the transaction is gone."""

from __future__ import annotations

import asyncio
import time

import asyncpg

from jobqueue.adapters.postgres.migrations import upgrade
from tests.support.migrating import WRITE_LOCK_TIMEOUT, _job_columns, migrating
from tests.support.postgres import dsn

# Long enough for many of the ALTER's tries (each 50 ms, then a pause of 20-100 ms), far
# shorter than all 200 of them.
HELD_SECONDS = 3.0


async def test_an_alter_behind_a_long_transaction_holds_no_write_back(
    empty_database_url: str,
) -> None:
    url = empty_database_url
    await asyncio.to_thread(upgrade, url, "0012")
    holder = await asyncpg.connect(dsn(url))
    writer = await asyncpg.connect(dsn(url))
    try:
        await writer.execute(f"SET lock_timeout = '{WRITE_LOCK_TIMEOUT}'")
        long = holder.transaction()
        await long.start()
        # A report's long read, say: its lock on `jobs` lasts until its transaction ends.
        await holder.fetchval("SELECT count(*) FROM jobs")
        written = 0
        async with migrating(url, "upgrade", "0013") as migration:
            # Under the former 5 s lock_timeout the ALTER waited for the reader, and
            # every insert queued behind it until the writer's own timeout failed it.
            until = time.monotonic() + HELD_SECONDS
            while time.monotonic() < until:
                await writer.execute("INSERT INTO jobs (type, max_attempts) VALUES ('t', 3)")
                written += 1
            assert not migration.done()  # still trying, between the writes
            await long.rollback()
            await asyncio.wait_for(migration, timeout=60)
        assert written > 0
        assert "timeout" in await asyncio.to_thread(_job_columns, url)
    finally:
        await writer.close()
        await holder.close()
