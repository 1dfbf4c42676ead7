"""Statements the benchmark runs around the store: seeding, resetting, counting, facts.

They set the stage and are never timed as part of a scenario, except `unfinished`, the
cheap probe a drain polls to see when it is done.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

JOB_TYPE = "bench.noop"
HISTORY_TYPE = "bench.history"


async def seed_pending(engine: AsyncEngine, count: int) -> None:
    """`count` due no-op jobs in one statement, as a bulk enqueue would leave them."""
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO jobs (type, max_attempts)"
                " SELECT :type, 3 FROM generate_series(1, :count)"
            ),
            {"type": JOB_TYPE, "count": count},
        )


async def seed_history(engine: AsyncEngine, rows: int) -> None:
    """`rows` completed jobs spread over the past, like a table that has run for a while."""
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO jobs (type, payload, status, attempts, max_attempts, run_at,"
                "                  created_at, updated_at)"
                " SELECT :type, jsonb_build_object('n', n), 'completed', 1, 3, at, at, at"
                " FROM generate_series(1, :rows) AS n,"
                "      LATERAL (SELECT now() - make_interval(secs => n)) AS past(at)"
            ),
            {"type": HISTORY_TYPE, "rows": rows},
        )


async def reset(engine: AsyncEngine) -> None:
    """Remove every job a scenario made, keep the history, and leave fresh statistics
    and a vacuumed table, so each scenario starts from the same state."""
    async with engine.begin() as connection:
        await connection.execute(
            text("DELETE FROM jobs WHERE type <> :history"), {"history": HISTORY_TYPE}
        )
    async with engine.connect() as connection:
        autocommit = await connection.execution_options(isolation_level="AUTOCOMMIT")
        await autocommit.execute(text("VACUUM ANALYZE jobs"))


async def unfinished(engine: AsyncEngine) -> int:
    """Jobs still pending or processing; each count is served by its partial index."""
    async with engine.connect() as connection:
        result = await connection.execute(
            text(
                "SELECT (SELECT count(*) FROM jobs WHERE status = 'pending')"
                "     + (SELECT count(*) FROM jobs WHERE status = 'processing')"
            )
        )
        return int(result.scalar_one())


async def completed_runs(engine: AsyncEngine) -> int:
    async with engine.connect() as connection:
        result = await connection.execute(
            text("SELECT count(*) FROM jobs WHERE type = :type AND status = 'completed'"),
            {"type": JOB_TYPE},
        )
        return int(result.scalar_one())


@dataclass(frozen=True, slots=True)
class ServerFacts:
    version: str
    version_num: int
    fsync: str
    synchronous_commit: str
    shared_buffers: str


async def server_facts(engine: AsyncEngine) -> ServerFacts:
    async with engine.connect() as connection:
        row = (
            await connection.execute(
                text(
                    "SELECT current_setting('server_version'),"
                    " current_setting('server_version_num')::int,"
                    " current_setting('fsync'), current_setting('synchronous_commit'),"
                    " current_setting('shared_buffers')"
                )
            )
        ).one()
    return ServerFacts(*row)


async def table_size(engine: AsyncEngine) -> str:
    async with engine.connect() as connection:
        result = await connection.execute(
            text("SELECT pg_size_pretty(pg_total_relation_size('jobs'))")
        )
        return str(result.scalar_one())
