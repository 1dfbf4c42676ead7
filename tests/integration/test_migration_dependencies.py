"""Migration 0024 (dependencies and workflows) on a filled `jobs` table while writes go on:
its columns, table, functions and triggers are catalog changes, its status CHECK is
validated under a lock that lets writes pass and its indexes are built CONCURRENTLY, so
inserts, endings and deletes wait for catalog changes only, never for a read of the
table (a monitor watches the locks the migration holds); the release then works on the
old table's rows; the downgrade refuses while a job waits, and otherwise takes it all
away, while writes go on, losing no job."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import asyncpg
import pytest
from sqlalchemy.exc import DBAPIError

from jobqueue.adapters.postgres.migrations import downgrade, upgrade
from jobqueue.adapters.postgres.schema import metadata
from tests.support.migrating import (
    FILLED_ROWS,
    WRITE_LOCK_TIMEOUT,
    _drift,
    _fetch,
    _job_columns,
    migrating,
)
from tests.support.postgres import dsn

# The filled table's pending jobs the ending writer ends (or deletes, one in ten).
ENDED = 100_000

COLUMNS = {"depends_on", "run_anyway", "workflow_id", "waiting_for", "has_dependents"}
INDEXES = {
    "ix_jobs_waiting": "USING btree (run_at) WHERE (status = 'waiting'::text)",
    "ix_jobs_workflow": "USING btree (workflow_id, created_at, id) WHERE (workflow_id IS NOT NULL)",
}
FUNCTIONS = {"jobqueue_note_ending", "jobqueue_release_dependents"}
TRIGGERS_0023 = {"jobs_announce_ending", "jobs_announce_deleted"}
TRIGGERS_0024 = TRIGGERS_0023 | {"jobs_note_ending", "jobs_note_deleted", "jobs_release_dependents"}

_TRIGGERS = (
    "SELECT tgname, tgenabled::text, pg_get_triggerdef(oid) FROM pg_trigger"
    " WHERE tgrelid = 'jobs'::regclass AND NOT tgisinternal"
)
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


async def _triggers(url: str) -> dict[str, tuple[str, str]]:
    return {
        name: (enabled, definition) for name, enabled, definition in await _fetch(url, _TRIGGERS)
    }


async def _status(connection: asyncpg.Connection, job_id: UUID) -> asyncpg.Record:
    row = await connection.fetchrow(
        "SELECT status, waiting_for, run_at, last_error FROM jobs WHERE id = $1", job_id
    )
    assert row is not None
    return row


async def _insert(connection: asyncpg.Connection, status: str, **columns: Any) -> UUID:
    names = ", ".join(["type", "max_attempts", "status", *columns])
    places = ", ".join(f"${n}" for n in range(1, len(columns) + 4))
    job_id: UUID = await connection.fetchval(
        f"INSERT INTO jobs ({names}) VALUES ({places}) RETURNING id",
        "d",
        3,
        status,
        *columns.values(),
    )
    return job_id


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
