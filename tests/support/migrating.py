"""What the migration tests share: the head revision, the schema read back (its columns,
indexes, triggers and drift from a metadata), and a migration run in a process of its own
while writes go on, on a `jobs` table filled with FILLED_ROWS jobs: inserts alone, or
inserts, endings and deletes with a monitor watching the locks the migration holds."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

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


_TRIGGERS = (
    "SELECT tgname, tgenabled::text, pg_get_triggerdef(oid) FROM pg_trigger"
    " WHERE tgrelid = 'jobs'::regclass AND NOT tgisinternal"
)


async def _triggers(url: str) -> dict[str, tuple[str, str]]:
    return {
        name: (enabled, definition) for name, enabled, definition in await _fetch(url, _TRIGGERS)
    }


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


# The filled table's pending jobs the ending writer ends (or deletes, one in ten).
ENDED = 100_000


@dataclass
class Writes:
    """What the writers did while a migration ran, and what a monitor saw meanwhile."""

    inserted: int = 0
    ended: int = 0
    deleted: int = 0
    slowest: float = 0.0  # seconds: the longest single write
    samples: int = 0  # the monitor's looks at the locks
    waited: int = 0  # of which a writer was waiting for a lock
    # Each statement of the migration seen holding a lock on `jobs` that holds writes
    # back, with that lock's mode.
    blocking: set[tuple[str, str]] = field(default_factory=set)


# The lock modes that conflict with ROW EXCLUSIVE, a write's.
_HOLDS_WRITES = ["ShareLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock"]


def _reads_the_table(statement: str) -> bool:
    """Whether `statement`, holding a lock that holds writes back, would hold it for as
    long as reading every row takes: an index built or a CHECK validated under it."""
    statement = " ".join(statement.split()).upper()
    built = "CREATE INDEX" in statement and "CONCURRENTLY" not in statement
    checked = "ADD CONSTRAINT" in statement and "NOT VALID" not in statement
    return built or checked or "VALIDATE CONSTRAINT" in statement


async def _fill(connection: asyncpg.Connection) -> list[UUID]:
    """FILLED_ROWS jobs (half pending, half completed), as `tests.support.migrating` fills them;
    returns ENDED of the pending ones, for the ending writer."""
    await connection.execute(
        "INSERT INTO jobs (type, status, attempts, max_attempts, run_at, updated_at)"
        " SELECT 't', CASE WHEN n % 2 = 0 THEN 'pending' ELSE 'completed' END, 0, 3,"
        "        now() - make_interval(secs => n), now()"
        " FROM generate_series(1, $1::int) AS n",
        FILLED_ROWS,
    )
    rows = await connection.fetch(
        "SELECT id FROM jobs WHERE status = 'pending' ORDER BY id LIMIT $1", ENDED
    )
    return [row["id"] for row in rows]


async def _watch(
    monitor: asyncpg.Connection,
    ours: list[int],
    writers: list[int],
    migration: asyncio.Future[None],
    writes: Writes,
) -> None:
    """Look at the locks on `jobs` again and again until `migration` is done: a lock that
    holds writes back is put down to the statement its holder ran before and after it
    was seen (the same one, started at the same time)."""
    jobs = await monitor.fetchval("SELECT 'jobs'::regclass::oid")
    activity = (
        "SELECT pid, query, query_start, wait_event_type FROM pg_stat_activity"
        " WHERE datname = current_database()"
    )
    while not migration.done():
        before = {row["pid"]: row for row in await monitor.fetch(activity)}
        held = await monitor.fetch(
            "SELECT pid, mode FROM pg_locks WHERE relation = $1 AND granted"
            " AND mode = ANY($2::text[]) AND pid <> ALL($3::int[])",
            jobs,
            _HOLDS_WRITES,
            ours,
        )
        after = {row["pid"]: row for row in await monitor.fetch(activity)}
        writes.samples += 1
        writes.waited += any(before[pid]["wait_event_type"] == "Lock" for pid in writers)
        for pid, mode in held:
            was, now = before.get(pid), after.get(pid)
            if (
                was
                and now
                and (was["query"], was["query_start"]) == (now["query"], now["query_start"])
            ):
                writes.blocking.add((" ".join(was["query"].split()), mode))


async def _migrate_while_writing(
    url: str, direction: str, revision: str, ids: list[UUID], *others: asyncpg.Connection
) -> Writes:
    """Migrate (see `_migrate`) while one connection inserts job after job and another
    ends `ids`' jobs one by one (UPDATE OF status, which 0024's triggers fire on), deleting
    one in ten, each write under WRITE_LOCK_TIMEOUT; and a third watches the locks (an
    index built or a constraint validated under a lock is caught whatever it lasts:
    `_reads_the_table`). `others` are the test's own connections, idle meanwhile. The ids
    written are removed."""
    inserting = await asyncpg.connect(dsn(url))
    ending = await asyncpg.connect(dsn(url))
    monitor = await asyncpg.connect(dsn(url))
    writes = Writes()
    try:
        for connection in (inserting, ending):
            await connection.execute(f"SET lock_timeout = '{WRITE_LOCK_TIMEOUT}'")
        writers = [inserting.get_server_pid(), ending.get_server_pid()]
        ours = [*writers, monitor.get_server_pid(), *(c.get_server_pid() for c in others)]
        async with migrating(url, direction, revision) as migration:

            async def write(connection: asyncpg.Connection, query: str, *args: Any) -> None:
                started = time.perf_counter()
                await connection.execute(query, *args)
                writes.slowest = max(writes.slowest, time.perf_counter() - started)

            async def insert() -> None:
                while not migration.done():
                    await write(inserting, "INSERT INTO jobs (type, max_attempts) VALUES ('t', 3)")
                    writes.inserted += 1

            async def end() -> None:
                while ids and not migration.done():
                    job_id = ids.pop()
                    if (writes.ended + writes.deleted) % 10 == 0:
                        await write(ending, "DELETE FROM jobs WHERE id = $1", job_id)
                        writes.deleted += 1
                    else:
                        await write(
                            ending,
                            "UPDATE jobs SET status = 'completed', updated_at = now()"
                            " WHERE id = $1",
                            job_id,
                        )
                        writes.ended += 1

            await asyncio.gather(insert(), end(), _watch(monitor, ours, writers, migration, writes))
            await migration
    finally:
        await monitor.close()
        await ending.close()
        await inserting.close()
    print(f"\n{writes}")  # the figures, with -s
    assert min(writes.inserted, writes.ended, writes.deleted) > 0, writes
    assert writes.samples > 0, writes  # the monitor looked while the migration ran
    assert not [each for each in writes.blocking if _reads_the_table(each[0])], writes
    return writes
