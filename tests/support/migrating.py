"""What the migration tests share: the head revision, the schema read back (its columns,
indexes and drift from a metadata), and a migration run in a process of its own while
writes go on, on a `jobs` table filled with FILLED_ROWS jobs."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import MetaData
from sqlalchemy.engine import Connection

from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.schema_version import head_revisions
from tests.support.postgres import dsn

(HEAD,) = head_revisions()


async def _fetch(url: str, query: str) -> list[Any]:
    connection = await asyncpg.connect(dsn(url))
    try:
        return [tuple(row) for row in await connection.fetch(query)]
    finally:
        await connection.close()


def _fetch_sync(url: str, query: str) -> list[Any]:
    return asyncio.run(_fetch(url, query))


def _job_columns(url: str) -> set[str]:
    rows = _fetch_sync(
        url, "SELECT column_name FROM information_schema.columns WHERE table_name = 'jobs'"
    )
    return {row[0] for row in rows}


def _job_indexes(url: str) -> set[str]:
    rows = _fetch_sync(url, "SELECT indexname FROM pg_indexes WHERE tablename = 'jobs'")
    return {row[0] for row in rows}


def _drift(url: str, target: MetaData) -> list[Any]:
    def compare(connection: Connection) -> list[Any]:
        context = MigrationContext.configure(
            connection, opts={"compare_type": True, "compare_server_default": True}
        )
        return list(compare_metadata(context, target))

    async def run() -> list[Any]:
        engine = create_engine(url, pool_size=1)
        try:
            async with engine.connect() as connection:
                return await connection.run_sync(compare)
        finally:
            await engine.dispose()

    return asyncio.run(run())


async def _valid_due_indexes(url: str) -> dict[str, bool]:
    rows = await _fetch(
        url,
        "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " WHERE c.relname LIKE 'ix_jobs_due%'",
    )
    return dict(rows)


FILLED_ROWS = 300_000
# How long a write to the filled table may wait for a lock: shorter than half of what a
# rewrite of the table holds writes back (2.1-2.3 s for FILLED_ROWS, ALTER COLUMN TYPE or a
# volatile default, on an idle dev machine), so a rewrite fails the test; longer than what
# two cores busy with the rest of the suite made of a brief switch (100 and 250 ms were
# both met, the migrating process waiting for a core while it held the lock).
WRITE_LOCK_TIMEOUT = "1s"


class MigrationFailed(Exception):
    """The migration's process ended in error (its stderr is the message)."""


async def _migrate(url: str, direction: str, revision: str) -> None:
    """Migrate `url` (`direction` "upgrade" or "downgrade") in a process of its own, as a
    deployment does: run in a thread of the test's process, the migration's statements
    queued for the interpreter behind the writers and the monitor, and held `jobs`
    locked the longer for it (a writer's 100 ms timeout was met so on a loaded machine)."""
    program = (
        "import sys\n"
        "from jobqueue.adapters.postgres import migrations\n"
        "getattr(migrations, sys.argv[1])(sys.argv[2], sys.argv[3])\n"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", program, direction, url, revision, stderr=asyncio.subprocess.PIPE
    )
    try:
        _, errors = await process.communicate()
    except BaseException:
        # Cancelled (a writer failed the test): the process goes now. Left running, its
        # transport was found unclosed at a later test's end, and failed that test.
        if process.returncode is None:
            process.kill()
        await process.wait()
        raise
    if process.returncode != 0:
        raise MigrationFailed(errors.decode())


@contextlib.asynccontextmanager
async def migrating(url: str, direction: str, revision: str) -> AsyncIterator[asyncio.Task[None]]:
    """`_migrate` as a task for the block, which writes meanwhile; cancelled (its process
    killed) if the block leaves before it is done."""
    task = asyncio.create_task(_migrate(url, direction, revision))
    try:
        yield task
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def _migrate_a_filled_table_while_writing(
    connection: asyncpg.Connection, url: str, revision: str
) -> int:
    """Fill `jobs` (FILLED_ROWS, half pending, half completed), then upgrade to
    `revision` while `connection` inserts job after job, each with a lock timeout far
    shorter than a table rewrite or a blocking index build would hold it: a write that
    waits that long fails the test. Returns how many were written meanwhile."""
    await connection.execute(
        "INSERT INTO jobs (type, status, attempts, max_attempts, run_at, updated_at)"
        " SELECT 't', CASE WHEN n % 2 = 0 THEN 'pending' ELSE 'completed' END, 0, 3,"
        "        now() - make_interval(secs => n), now()"
        " FROM generate_series(1, $1::int) AS n",
        FILLED_ROWS,
    )
    await connection.execute(f"SET lock_timeout = '{WRITE_LOCK_TIMEOUT}'")
    written = 0
    async with migrating(url, "upgrade", revision) as migration:
        while not migration.done():
            await connection.execute("INSERT INTO jobs (type, max_attempts) VALUES ('t', 3)")
            written += 1
        await migration
    return written
