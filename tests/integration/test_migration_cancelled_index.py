"""Migration 0027 (cancelled jobs indexed by type, without the status in front) on a
filled `jobs` table while writes go on: inserts, endings and deletes never wait for it
longer than a short lock timeout, either way; each way leaves one valid index, as that
revision declares it, and the listing of cancelled jobs reads a few pages a type.

On PostgreSQL 15, the fault tests' server: the old index's cost shows on a server without
btree skip scans (before 18, most of those in use); the embedded server the other tests
run on is 18, which skips over the status and read 537 pages where 15 read 14,203.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import asyncpg

from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.migrations import upgrade
from jobqueue.adapters.postgres.schema import metadata
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.listing import JobQuery
from jobqueue.domain.status import Status
from tests.support.dependency_migrations import _version
from tests.support.migrating import (
    HEAD,
    _drift,
    _fetch,
    _fill,
    _job_indexes,
    _migrate_while_writing,
)
from tests.support.plans import capture_statements
from tests.support.postgres import dsn

if TYPE_CHECKING:
    from tests.support.pg_server import PgServer

pytest_plugins = ["tests.support.pg_server"]

REVISION = "0027"
_INDEXES = (
    "SELECT c.relname, i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i"
    " JOIN pg_class c ON c.oid = i.indexrelid"
    " WHERE c.relname IN ('ix_jobs_cancelled', 'ix_jobs_cancelled_by_type')"
)
# Cancelled jobs of 30 types, one a minute: the last hour holds two of each type, fewer
# than a page, so no type's range stops early for having filled it.
CANCELLED = 30_000


async def _listing_pages(url: str) -> int:
    """The pages the store's listing of the jobs cancelled in the last hour reads."""
    engine = create_engine(url, pool_size=1)
    try:
        query = JobQuery(status=Status.CANCELLED, finished_from=datetime.now(UTC) - HOUR)
        with capture_statements(engine) as sent:
            page = await PostgresJobStore(engine).list_jobs(query)
        assert len(page.jobs) == 50  # a full page: 60 ended in the hour
        [(statement, parameters)] = [(s, p) for s, p in sent if "jobs" in s]
        async with engine.connect() as connection:
            result = await connection.exec_driver_sql(
                "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, tuple(parameters)
            )
            document = result.scalar_one()
    finally:
        await engine.dispose()
    top = (json.loads(document) if isinstance(document, str) else document)[0]["Plan"]
    return int(top["Shared Hit Blocks"] + top["Shared Read Blocks"])


HOUR = timedelta(hours=1)


async def test_the_cancelled_index_moves_on_a_filled_table_without_blocking_writes(
    pg15: PgServer,
) -> None:
    url = pg15.database_url(await asyncio.to_thread(pg15.create_database))
    await asyncio.to_thread(upgrade, url, "0026")
    indexes = await asyncio.to_thread(_job_indexes, url)
    assert "ix_jobs_cancelled" in indexes
    connection = await asyncpg.connect(dsn(url))
    try:
        ids = await _fill(connection)
        await connection.execute(
            "INSERT INTO jobs (type, status, attempts, max_attempts, updated_at)"
            " SELECT 'kind-' || (n % 30), 'cancelled', 1, 3,"
            "        now() - make_interval(mins => n) + interval '30 seconds'"
            " FROM generate_series(1, $1::int) AS n",
            CANCELLED,
        )
        await connection.execute("ANALYZE jobs")
        before = await _listing_pages(url)

        up = await _migrate_while_writing(url, "upgrade", REVISION, ids, connection)
        assert await _version(url) == [(REVISION,)]
        [(name, valid, definition)] = await _fetch(url, _INDEXES)
        assert (name, valid) == ("ix_jobs_cancelled_by_type", True)
        assert definition.endswith(
            "USING btree (type, updated_at) WHERE (status = 'cancelled'::text)"
        )
        assert await asyncio.to_thread(_job_indexes, url) == (
            indexes - {"ix_jobs_cancelled"} | {"ix_jobs_cancelled_by_type"}
        )
        # The loose scan over types descends by type: a few pages a visit, not the index
        # read from one end (as with the status in front, which the planner dropped).
        plan = await connection.fetch(
            "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) SELECT type FROM jobs"
            " WHERE status = 'cancelled' AND type > 'kind-5' ORDER BY type LIMIT 1"
        )
        text = "\n".join(row[0] for row in plan)
        assert "ix_jobs_cancelled_by_type" in text
        assert "Index Cond: (type > 'kind-5'::text)" in text
        # The listing: a few pages a type, where with the status in front each type's
        # loose step and range read the index from one end.
        after = await _listing_pages(url)
        assert after <= 1_000, after
        assert before >= 5 * after, (before, after)

        down = await _migrate_while_writing(url, "downgrade", "0026", ids, connection)
        assert await _version(url) == [("0026",)]
        [(name, valid, definition)] = await _fetch(url, _INDEXES)
        assert (name, valid) == ("ix_jobs_cancelled", True)
        assert definition.endswith(
            "USING btree (status, type, updated_at) WHERE (status = 'cancelled'::text)"
        )
        assert await asyncio.to_thread(_job_indexes, url) == indexes
        ended = up.ended + down.ended
        assert ended > 0

        await asyncio.to_thread(upgrade, url)
        assert await _version(url) == [(HEAD,)]
        assert await asyncio.to_thread(_drift, url, metadata) == []
    finally:
        await connection.close()
