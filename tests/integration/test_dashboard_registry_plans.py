"""The statements behind the workers, periodic and job-type pages read a bounded number
of rows however big `jobs` is: the live processes from `processes` alone (a row per
process of the fleet), the last slots with one primary-key probe of `jobs` per schedule,
the published types from `job_types` alone.

The statements explained are the ones the adapters send, captured from the engine, and
run under EXPLAIN ANALYZE, whose buffer counts say how much each really read.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.job_types import PostgresJobTypes
from jobqueue.adapters.postgres.periodic import PostgresPeriodicSlots
from jobqueue.adapters.postgres.processes import PostgresProcesses
from tests.support.plans import FINISHED_ROWS, capture_statements, fill_table

SCHEDULES = 50
PROCESSES = 1_000
TYPES = 500


@pytest.fixture(scope="module")
def big_table(database_url: str) -> str:
    """Many finished jobs; schedules whose last jobs are among them (and a few whose jobs
    are gone); a large fleet's processes, half of them expired; many published types."""
    fill_table(database_url, [("completed", FINISHED_ROWS, 1)])
    return database_url


async def _seed_registries(engine: AsyncEngine) -> None:
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO periodic_slots (name, last_slot, last_job_id)"
                " SELECT 'schedule-' || n, now(), CASE WHEN n % 10 = 0 THEN gen_random_uuid()"
                "        ELSE (SELECT id FROM jobs ORDER BY id OFFSET n LIMIT 1) END"
                " FROM generate_series(1, :schedules) AS n"
            ),
            {"schedules": SCHEDULES},
        )
        await connection.execute(
            text(
                "INSERT INTO processes (id, host, pid, version, queues, types, concurrency,"
                "                       running, expires_at)"
                " SELECT gen_random_uuid(), 'host-' || (n % 40), n, '1.0', '{default,emails}',"
                "        '{sleep,webhook}', 10, 1,"
                "        now() + CASE WHEN n % 2 = 0 THEN interval '1 hour'"
                "                     ELSE interval '-1 hour' END"
                " FROM generate_series(1, :processes) AS n"
            ),
            {"processes": PROCESSES},
        )
        await connection.execute(
            text(
                "INSERT INTO job_types (name, payload_schema, options, published_by)"
                " SELECT 'type-' || n, '{\"type\": \"object\"}',"
                '        \'{"queue": "default", "priority": 0}\', \'host:1\''
                " FROM generate_series(1, :types) AS n"
            ),
            {"types": TYPES},
        )
    async with engine.connect() as connection:
        for table in ("periodic_slots", "processes", "job_types"):
            await connection.execute(text(f"ANALYZE {table}"))
        await connection.commit()


async def _explained(engine: AsyncEngine, read: Callable[[], Awaitable[Any]]) -> str:
    """The plan, as run, of the one statement `read` sends."""
    with capture_statements(engine) as sent:
        await read()
    [(statement, parameters)] = sent
    async with engine.connect() as connection:
        result = await connection.exec_driver_sql(
            "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + statement, tuple(parameters)
        )
        plan = "\n".join(row[0] for row in result)
        await connection.rollback()
    return plan


def _buffers(plan: str) -> int:
    """The pages the whole statement touched (its top node's buffers)."""
    top = next(line for line in plan.splitlines() if "Buffers:" in line)
    return sum(int(n) for n in re.findall(r"shared (?:hit|read|dirtied|written)=(\d+)", top))


def _tables(plan: str) -> set[str]:
    return set(re.findall(r" on (\w+)", plan))


async def test_the_registry_pages_read_a_bounded_number_of_rows(plan_engine: AsyncEngine) -> None:
    # One test for the three statements: the table is filled once per xdist worker.
    await _seed_registries(plan_engine)

    live = await _explained(plan_engine, PostgresProcesses(plan_engine).live)
    assert _tables(live) == {"processes"}, live
    assert f"Rows Removed by Filter: {PROCESSES // 2}" in live, live
    # 1,000 processes, a few dozen pages: the fleet's size, not the jobs'.
    assert _buffers(live) < 100, live

    slots = await _explained(plan_engine, PostgresPeriodicSlots(plan_engine).last_slots)
    assert "Seq Scan on jobs" not in slots, slots
    assert re.search(r"Index (Only )?Scan using \w+ on jobs", slots), slots
    # A probe of the primary key per schedule: a few pages each, whatever the jobs.
    assert _buffers(slots) < SCHEDULES * 6, slots

    types = await _explained(plan_engine, PostgresJobTypes(plan_engine).published)
    assert _tables(types) == {"job_types"}, types
    assert _buffers(types) < 100, types
