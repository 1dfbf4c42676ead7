"""Statements the benchmark runs around the store: seeding, resetting, counting, facts.

They set the stage and are never timed as part of a scenario, except `unfinished`, the
cheap probe a drain polls to see when it is done.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.bench.worker_handlers import NOOP_TYPE
from jobqueue.domain.fields import DEFAULT_PRIORITY, DEFAULT_QUEUE

HISTORY_TYPE = "bench.history"
SCHEDULED_TYPE = "bench.scheduled"
# The `application_name` of a service process's LISTEN connection (`asyncpg_connect` in
# adapters/postgres/listener.py): one per worker process that is listening for new jobs,
# and one per API process, which listens for jobs' ends.
LISTENER_APPLICATION = "jobqueue listener"
# That of the LISTEN connection of an in-process producer's waits (`jobqueue.wait`,
# adapters/postgres/engine_waits.py).
WAITS_APPLICATION = "jobqueue waits"


async def seed_pending(engine: AsyncEngine, count: int, keys: int = 0) -> None:
    """`count` due no-op jobs in one statement, as a bulk enqueue would leave them; spread
    evenly over `keys` partition keys, in turn, when given."""
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO jobs (type, max_attempts, partition_key)"
                " SELECT :type, 3, CASE WHEN :keys > 0 THEN 'k' || n % :keys END"
                " FROM generate_series(1, :count) AS n"
            ),
            {"type": NOOP_TYPE, "count": count, "keys": keys},
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


async def seed_scheduled(engine: AsyncEngine, rows: int) -> None:
    """`rows` pending jobs due a day from now and later, a second apart: none becomes due
    during a run. Queue and priority are the columns' defaults, those of the no-op jobs
    the pools claim, so these rows lie in the very index range each claim reads, just
    past the due jobs: the round shows what they cost the claim."""
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO jobs (type, payload, max_attempts, run_at)"
                " SELECT :type, jsonb_build_object('n', n), 3,"
                "        now() + interval '1 day' + make_interval(secs => n)"
                " FROM generate_series(1, :rows) AS n"
            ),
            {"type": SCHEDULED_TYPE, "rows": rows},
        )


async def remove_scheduled(engine: AsyncEngine) -> None:
    """Delete the scheduled jobs, which `reset` keeps; `reset` after it vacuums them away."""
    async with engine.begin() as connection:
        await connection.execute(
            text("DELETE FROM jobs WHERE type = :scheduled"), {"scheduled": SCHEDULED_TYPE}
        )


async def reset(engine: AsyncEngine) -> None:
    """Remove every job a scenario made, keep the history and the scheduled jobs (the
    table a round runs on), and leave fresh statistics and a vacuumed table, so each
    scenario starts from the same state."""
    async with engine.begin() as connection:
        await connection.execute(
            text("DELETE FROM jobs WHERE type NOT IN (:history, :scheduled)"),
            {"history": HISTORY_TYPE, "scheduled": SCHEDULED_TYPE},
        )
    async with engine.connect() as connection:
        autocommit = await connection.execution_options(isolation_level="AUTOCOMMIT")
        await autocommit.execute(text("VACUUM ANALYZE jobs"))


async def unfinished(engine: AsyncEngine) -> int:
    """Jobs due and still pending, or processing: what a drain waits for. Each count is
    served by its partial index.

    Jobs scheduled for later are not counted (the scheduled round's drains would never
    end), and not read either: a drain polls this every 25 ms, and counting 100,000
    scheduled entries each time would load the server during the very run it measures.
    Every job the benchmark runs is in the default queue at the default priority, so the
    due ones are one range of ix_jobs_due_by_queue, `(queue, priority, run_at, id)`,
    whose scan stops at the first entry not yet due. A job put back for a later retry is
    not counted either, but `drained` then finds it not completed once."""
    async with engine.connect() as connection:
        result = await connection.execute(
            text(
                "SELECT (SELECT count(*) FROM jobs WHERE status = 'pending'"
                "        AND queue = :queue AND priority = :priority AND run_at <= now())"
                "     + (SELECT count(*) FROM jobs WHERE status = 'processing')"
            ),
            {"queue": DEFAULT_QUEUE, "priority": DEFAULT_PRIORITY},
        )
        return int(result.scalar_one())


async def unwatched(engine: AsyncEngine, job_ids: Sequence[UUID]) -> set[UUID]:
    """Those of `job_ids` no wait marked `watched`: they had ended before their wait
    asked (a wait marks live jobs only)."""
    async with engine.connect() as connection:
        result = await connection.execute(
            text("SELECT id FROM jobs WHERE id = ANY(:ids) AND NOT watched"),
            {"ids": list(job_ids)},
        )
        return {row[0] for row in result}


async def noop_jobs(engine: AsyncEngine) -> int:
    """No-op jobs in the table, whatever their status: what an enqueue run stored."""
    async with engine.connect() as connection:
        result = await connection.execute(
            text("SELECT count(*) FROM jobs WHERE type = :type"), {"type": NOOP_TYPE}
        )
        return int(result.scalar_one())


@dataclass(frozen=True, slots=True)
class Drained:
    """What became of a drain's no-op jobs."""

    jobs: int
    completed_once: int  # completed, with attempts = 1: claimed once, never run again

    def problem(self, expected: int) -> str | None:
        if self.jobs == expected and self.completed_once == expected:
            return None
        return (
            f"{self.completed_once:,} of {expected:,} jobs completed with one attempt "
            f"({self.jobs:,} no-op jobs in the table)"
        )


async def drained(engine: AsyncEngine) -> Drained:
    async with engine.connect() as connection:
        row = (
            await connection.execute(
                text(
                    "SELECT count(*),"
                    " count(*) FILTER (WHERE status = 'completed' AND attempts = 1)"
                    " FROM jobs WHERE type = :type"
                ),
                {"type": NOOP_TYPE},
            )
        ).one()
    return Drained(int(row[0]), int(row[1]))


async def listening_processes(engine: AsyncEngine) -> int:
    """Service processes on this database whose LISTEN connection is open: worker
    processes, and API processes (`LISTENER_APPLICATION`)."""
    async with engine.connect() as connection:
        result = await connection.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND application_name = :name"
            ),
            {"name": LISTENER_APPLICATION},
        )
        return int(result.scalar_one())


@dataclass(frozen=True, slots=True)
class ListenerBackend:
    """A LISTEN connection on this database: its `application_name`, its backend's pid
    and start. One lost and opened again is another."""

    application: str
    pid: int
    since: datetime


async def listening_connections(engine: AsyncEngine) -> set[ListenerBackend]:
    """The service processes' LISTEN connections and those of in-process waits."""
    async with engine.connect() as connection:
        result = await connection.execute(
            text(
                "SELECT application_name, pid, backend_start FROM pg_stat_activity"
                " WHERE datname = current_database() AND application_name IN (:service, :waits)"
            ),
            {"service": LISTENER_APPLICATION, "waits": WAITS_APPLICATION},
        )
        return {ListenerBackend(*row) for row in result}


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
