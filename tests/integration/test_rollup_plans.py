"""The rollup's statements on a week of rows for 20 queues: a chart reads its window's
rows alone (one range of the primary key), every queue's or one's, and retention's
delete reads the oldest range; none scans the table, as planned for the values given or
as the generic plan a prepared statement may switch to."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.rollup import PostgresRollup
from jobqueue.domain.throughput import ROLLUP_KEPT, WINDOWS, Window
from tests.support.plans import capture_statements, custom_and_generic_plans

QUEUES = 20
DAYS = 7


@pytest.fixture(scope="module")
def big_table(database_url: str) -> str:
    """This module's database: a row for every minute of the last week and every queue,
    as if retention had not run for days."""

    async def seed() -> None:
        engine = create_engine(database_url, pool_size=1)
        try:
            async with engine.begin() as connection:
                await connection.execute(
                    text(
                        "INSERT INTO job_rollup (minute, queue, completed, picked, pickup_50ms)"
                        " SELECT date_trunc('minute', now()) - make_interval(mins => m),"
                        " 'queue-' || q, 10, 10, 10"
                        f" FROM generate_series(0, {DAYS * 1440 - 1}) AS m,"
                        f" generate_series(1, {QUEUES}) AS q"
                    )
                )
            async with engine.connect() as connection:
                await connection.execution_options(isolation_level="AUTOCOMMIT")
                await connection.execute(text("ANALYZE job_rollup"))
        finally:
            await engine.dispose()

    asyncio.run(seed())
    return database_url


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


async def _rows_read(engine: AsyncEngine, statement: str, parameters: Sequence[Any]) -> int:
    """How many rows of `job_rollup` the statement read when run (kept or filtered out)."""
    async with engine.connect() as connection:
        result = await connection.exec_driver_sql(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + statement, tuple(parameters)
        )
        document = result.scalar_one()
        await connection.rollback()
    plan = (json.loads(document) if isinstance(document, str) else document)[0]["Plan"]
    read = 0
    for node in _nodes(plan):
        if node.get("Relation Name") == "job_rollup":
            kept = node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
            read += kept * node["Actual Loops"]
    return read


@pytest.mark.parametrize("window", WINDOWS, ids=lambda window: window.name)
@pytest.mark.parametrize("queue", [None, "queue-7"])
async def test_a_chart_reads_its_windows_rows_alone(
    plan_engine: AsyncEngine, window: Window, queue: str | None
) -> None:
    with capture_statements(plan_engine) as sent:
        slots = await PostgresRollup(plan_engine).series(window, queue)
    [(statement, parameters)] = [(s, p) for s, p in sent if "job_rollup" in s]

    assert len(slots) == window.points
    assert sum(slot.completed for slot in slots) >= 10 * (window.points - 1)
    minutes = int(window.span.total_seconds() // 60)
    # Every queue's rows of the window's minutes, the current one included, and no more.
    assert await _rows_read(plan_engine, statement, parameters) <= minutes * QUEUES
    for plan in await custom_and_generic_plans(plan_engine, statement, parameters):
        assert "Seq Scan on job_rollup" not in plan, plan
        assert "pk_job_rollup" in plan, plan


async def test_retention_reads_the_oldest_range_of_the_rollup(plan_engine: AsyncEngine) -> None:
    with capture_statements(plan_engine) as sent:
        # Deletes one batch of the oldest rows (past two days): the plans stay the same.
        assert await PostgresRollup(plan_engine).prune(ROLLUP_KEPT, 1000) == 1000
    [(statement, parameters)] = [(s, p) for s, p in sent if "job_rollup" in s]

    for plan in await custom_and_generic_plans(plan_engine, statement, parameters):
        assert "Seq Scan on job_rollup" not in plan, plan
        assert "pk_job_rollup" in plan, plan
        # Oldest first straight from the key: a sort would read every old row first.
        assert "Sort Key" not in plan, plan
