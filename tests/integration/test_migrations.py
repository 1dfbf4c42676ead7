"""Alembic owns the schema: reversible, safe to run from several processes at once, and
in agreement with `schema.py`, the metadata the store queries."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Column, MetaData, Text
from sqlalchemy.engine import Connection

from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.migrations import downgrade, upgrade
from jobqueue.adapters.postgres.schema import (
    job_dependencies,
    job_waits,
    jobs,
    key_starts,
    metadata,
    queues,
    type_rates,
)
from jobqueue.adapters.postgres.schema_version import head_revisions
from jobqueue.adapters.postgres.schema_workers import (
    job_rollup,
    job_types,
    periodic_slots,
    processes,
)
from jobqueue.domain.fields import MAX_PRIORITY, MIN_PRIORITY
from tests.support.postgres import dsn

PROJECT_ROOT = Path(__file__).resolve().parents[2]
(HEAD,) = head_revisions()
RETENTION_INDEXES = {"ix_jobs_finished_by_type", "ix_jobs_dead_letter"}


def _alembic_executable() -> Path:
    in_project = PROJECT_ROOT / ".venv" / "bin" / "alembic"
    return in_project if in_project.exists() else Path(sys.executable).with_name("alembic")


async def _fetch(url: str, query: str) -> list[Any]:
    connection = await asyncpg.connect(dsn(url))
    try:
        return [tuple(row) for row in await connection.fetch(query)]
    finally:
        await connection.close()


def _fetch_sync(url: str, query: str) -> list[Any]:
    return asyncio.run(_fetch(url, query))


def _versions(url: str) -> list[str]:
    exists = _fetch_sync(url, "SELECT to_regclass('alembic_version') IS NOT NULL")
    if not exists[0][0]:
        return []
    return [row[0] for row in _fetch_sync(url, "SELECT version_num FROM alembic_version")]


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


def test_upgrade_downgrade_upgrade_round_trips_on_an_empty_database(
    empty_database_url: str,
) -> None:
    url = empty_database_url
    upgrade(url)
    assert _versions(url) == [HEAD]
    assert "traceparent" in _job_columns(url)
    assert _job_indexes(url) >= RETENTION_INDEXES
    assert "ix_jobs_due_by_type" in _job_indexes(url)
    assert _fetch_sync(url, "SELECT to_regclass('job_rollup') IS NOT NULL") == [(True,)]

    downgrade(url, "0015")
    assert _fetch_sync(url, "SELECT to_regclass('job_rollup') IS NOT NULL") == [(False,)]
    assert _fetch_sync(url, "SELECT to_regclass('processes') IS NOT NULL") == [(True,)]

    downgrade(url, "0011")
    assert "timeout" not in _job_columns(url)
    assert _fetch_sync(url, "SELECT to_regclass('periodic_slots') IS NOT NULL") == [(False,)]
    assert "ix_jobs_due_by_type" not in _job_indexes(url)
    assert "ix_jobs_due_by_queue" in _job_indexes(url)

    downgrade(url, "0009")
    assert {"unique_key", "unique_states"}.isdisjoint(_job_columns(url))
    assert "uq_jobs_unique_key" not in _job_indexes(url)

    downgrade(url, "0008")
    assert "snoozes" not in _job_columns(url)
    assert "ix_jobs_cancelled" not in _job_indexes(url)

    downgrade(url, "0007")
    assert "ix_jobs_finished_by_type" not in _job_indexes(url)
    assert "ix_jobs_finished" in _job_indexes(url)

    assert {"started_at", "worker", "attempt_log"} <= _job_columns(url)
    downgrade(url, "0006")
    assert {"started_at", "worker", "attempt_log"}.isdisjoint(_job_columns(url))
    assert _fetch_sync(url, "SELECT to_regclass('queues') IS NOT NULL") == [(True,)]
    downgrade(url, "0005")
    assert _fetch_sync(url, "SELECT to_regclass('queues') IS NOT NULL") == [(False,)]

    downgrade(url, "0004")
    assert _versions(url) == ["0004"]
    assert {"queue", "priority"}.isdisjoint(_job_columns(url))
    assert "ix_jobs_due_by_queue" not in _job_indexes(url)
    assert "ix_jobs_due_key" in _job_indexes(url)

    downgrade(url, "0002")
    assert _versions(url) == ["0002"]
    assert not {"ix_jobs_finished", "ix_jobs_dead_letter"} & _job_indexes(url)

    downgrade(url, "0001")
    assert _versions(url) == ["0001"]
    assert _job_columns(url) == {column.name for column in jobs.c} - {
        "traceparent",
        "queue",
        "priority",
        "started_at",
        "worker",
        "attempt_log",
        "snoozes",
        "unique_key",
        "unique_states",
        "timeout",
        "partition_key",
        "result",
        "progress",
        "watched",
        "depends_on",
        "run_anyway",
        "workflow_id",
        "waiting_for",
        "has_dependents",
        "wait_id",
    }

    downgrade(url, "base")
    assert _versions(url) == []
    assert _job_columns(url) == set()

    upgrade(url)
    assert _versions(url) == [HEAD]
    assert _drift(url, metadata) == []


@pytest.mark.slow
def test_concurrent_upgrades_apply_each_migration_once(empty_database_url: str) -> None:
    environment = {**os.environ, "DATABASE_URL": empty_database_url}
    processes = [
        subprocess.Popen(
            [str(_alembic_executable()), "upgrade", "head"],
            cwd=PROJECT_ROOT,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = [process.communicate(timeout=300)[0] for process in processes]

    assert [process.returncode for process in processes] == [0] * 4, "\n".join(outputs)
    logs = "\n".join(outputs)
    assert logs.count("Running upgrade  -> 0001") == 1, logs
    assert logs.count("Running upgrade 0001 -> 0002") == 1, logs
    assert logs.count("Running upgrade 0002 -> 0003") == 1, logs
    assert logs.count("Running upgrade 0003 -> 0004") == 1, logs
    assert logs.count("Running upgrade 0004 -> 0005") == 1, logs
    assert logs.count("Running upgrade 0005 -> 0006") == 1, logs
    assert logs.count("Running upgrade 0006 -> 0007") == 1, logs
    assert logs.count("Running upgrade 0007 -> 0008") == 1, logs
    assert logs.count("Running upgrade 0008 -> 0009") == 1, logs
    assert logs.count("Running upgrade 0009 -> 0010") == 1, logs
    assert logs.count("Running upgrade 0010 -> 0011") == 1, logs
    assert _versions(empty_database_url) == [HEAD]


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


def test_the_priority_check_in_the_database_is_the_domain_s_range(database_url: str) -> None:
    # The revision spells the range out (it must keep meaning what it meant); the schema
    # derives it from the domain. They must agree.
    [(definition,)] = _fetch_sync(
        database_url,
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'ck_jobs_priority'",
    )
    assert definition == f"CHECK (((priority >= {MIN_PRIORITY}) AND (priority <= {MAX_PRIORITY})))"


def test_schema_module_and_migrations_agree(database_url: str) -> None:
    assert _drift(database_url, metadata) == []


def test_drift_check_notices_a_column_the_migrations_lack(database_url: str) -> None:
    # The agreement test above is only worth something if a difference shows up.
    changed = MetaData()
    queues.to_metadata(changed)
    job_types.to_metadata(changed)
    periodic_slots.to_metadata(changed)
    processes.to_metadata(changed)
    job_rollup.to_metadata(changed)
    key_starts.to_metadata(changed)
    type_rates.to_metadata(changed)
    job_dependencies.to_metadata(changed)
    job_waits.to_metadata(changed)
    jobs.to_metadata(changed).append_column(Column("colour", Text))
    drift = _drift(database_url, changed)
    assert [(entry[0], entry[3].name) for entry in drift] == [("add_column", "colour")]
