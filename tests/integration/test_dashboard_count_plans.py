"""The counts the dashboard's queue page and bulk actions show, on a big table, run and
measured (EXPLAIN ANALYZE) as planned for the values given and as the generic plan a
prepared statement may switch to.

The count a bulk action shows before it is confirmed (`count_selected`): each shape
reads its status's index and stops at `COUNT_BUDGET` rows, however many jobs match and
however few: the rows every index scan returned, and those it read and filtered out, are
at most `COUNT_BUDGET`. A queue's page (`queue_summary`): each counted status from its own
index, the pending jobs from the queue's range alone, never the table.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.bulk import COUNT_BUDGET, MAX_SELECTED, Selection, SelectionCount
from jobqueue.domain.status import COUNTED, TRAITS, Status
from jobqueue.domain.transitions import Operation
from tests.support.plans import (
    FINISHED_ROWS,
    capture_statements,
    fill_table,
    sql_literal,
    status_indexes,
)

# Many more of each selectable status than one call takes, all in the `default` queue and
# of type 'done' (`fill_table`), among many more completed jobs no selection may take.
HELD_ROWS = 20 * MAX_SELECTED
SCHEDULED = 5 * MAX_SELECTED
# A queue of its own with a few pending jobs, beside `default`'s many.
SMALL_QUEUE, SMALL_ROWS = "small", 10

SHAPES = [
    Selection(Status.DEAD_LETTER),
    Selection(Status.DEAD_LETTER, queue="default"),
    Selection(Status.DEAD_LETTER, queue="default", type="done"),
    Selection(Status.FAILED),
    Selection(Status.FAILED, type="done"),
    Selection(Status.FAILED, queue="default"),
    Selection(Status.CANCELLED, type="done"),
    Selection(Status.CANCELLED, queue="default"),
    Selection(Status.PENDING, operation=Operation.CANCEL),
    Selection(Status.PENDING, queue="default", operation=Operation.CANCEL),
    Selection(Status.PENDING, queue="default", type="later", operation=Operation.CANCEL),
    Selection(Status.PROCESSING, queue="default", operation=Operation.CANCEL),
    # A queue none of the dead letters or failed jobs is in: filtered row by row.
    Selection(Status.DEAD_LETTER, queue=SMALL_QUEUE),
    Selection(Status.FAILED, queue=SMALL_QUEUE),
]


@pytest.fixture(scope="module")
def big_table(database_url: str) -> str:
    fill_table(
        database_url,
        [
            ("completed", FINISHED_ROWS, 1),
            ("failed", HELD_ROWS, 1),
            ("dead_letter", HELD_ROWS, 1),
            ("cancelled", HELD_ROWS, 1),
        ],
        scheduled=SCHEDULED,
    )
    engine = create_engine(database_url, pool_size=1)

    async def small_queue() -> None:
        try:
            async with engine.begin() as connection:
                await connection.execute(
                    text(
                        "INSERT INTO jobs (type, queue, max_attempts, run_at)"
                        " SELECT 'done', :queue, 3, now() FROM generate_series(1, :rows)"
                    ),
                    {"queue": SMALL_QUEUE, "rows": SMALL_ROWS},
                )
                await connection.execute(text("ANALYZE jobs"))
        finally:
            await engine.dispose()

    asyncio.run(small_queue())
    return database_url


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


async def _analyzed(
    engine: AsyncEngine, statement: str, parameters: tuple[Any, ...]
) -> list[dict[str, Any]]:
    """The plan for the given values, then the generic plan, each run and measured."""
    explain = "EXPLAIN (ANALYZE, FORMAT JSON) "
    async with engine.connect() as connection:
        custom = await connection.exec_driver_sql(explain + statement, parameters)
        await connection.exec_driver_sql("SET plan_cache_mode = force_generic_plan")
        await connection.exec_driver_sql("PREPARE counted AS " + statement)
        arguments = ", ".join(sql_literal(value) for value in parameters)
        generic = await connection.exec_driver_sql(f"{explain}EXECUTE counted({arguments})")
        plans = [_plan(result.scalar_one()) for result in (custom, generic)]
        await connection.exec_driver_sql("DEALLOCATE counted")
        await connection.exec_driver_sql("RESET plan_cache_mode")
        await connection.rollback()
    return plans


def _plan(document: Any) -> dict[str, Any]:
    parsed = json.loads(document) if isinstance(document, str) else document
    plan: dict[str, Any] = parsed[0]["Plan"]
    return plan


def _expected(selection: Selection) -> SelectionCount:
    if selection.status is Status.PROCESSING:
        # The 20 running jobs, all read.
        return SelectionCount(20, complete=True)
    if selection.queue == SMALL_QUEUE:
        # None among the first COUNT_BUDGET read, and more not read.
        return SelectionCount(0, complete=False)
    if selection.type == "later":
        # The queue's range holds its 20 due 'done' jobs first (by type), then 'later's.
        return SelectionCount(COUNT_BUDGET - 20, complete=False)
    return SelectionCount(COUNT_BUDGET, complete=False)


async def test_each_count_reads_its_status_index_to_the_budget_at_most(
    plan_engine: AsyncEngine,
) -> None:
    store = PostgresJobStore(plan_engine)
    for selection in SHAPES:
        shape = f"{selection.status} queue={selection.queue} type={selection.type}"
        with capture_statements(plan_engine) as sent:
            counted = await store.count_selected(selection)
        assert counted == _expected(selection), shape
        [(statement, parameters)] = [(s, p) for s, p in sent if "jobs" in s]

        for plan in await _analyzed(plan_engine, statement, tuple(parameters)):
            scans = [node for node in _nodes(plan) if "Index Name" in node]
            [index] = [node["Index Name"] for node in scans]
            assert index in status_indexes(selection.status), (
                f"{shape}: {json.dumps(plan, indent=1)}"
            )
            for node in scans:
                read = node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
                assert read * node["Actual Loops"] <= COUNT_BUDGET, f"{shape}: read {read}"
            assert not any(node["Node Type"] == "Seq Scan" for node in _nodes(plan)), shape


async def test_a_queues_page_counts_each_status_from_its_index_and_its_queues_range(
    plan_engine: AsyncEngine,
) -> None:
    with capture_statements(plan_engine) as sent:
        summary = await PostgresJobStore(plan_engine).queue_summary(SMALL_QUEUE)
    assert summary.counts[Status.PENDING] == summary.due == SMALL_ROWS
    # The counts (the queue's state, read from `queues`, reads `jobs` only for a limit).
    [(statement, parameters)] = [(s, p) for s, p in sent if "FROM jobs" in s and "queues" not in s]

    for plan in await _analyzed(plan_engine, statement, tuple(parameters)):
        shown = json.dumps(plan, indent=1)
        scans = {node["Index Name"]: node for node in _nodes(plan) if "Index Name" in node}
        assert len(scans) == len(COUNTED), shown
        assert all(any(name in status_indexes(s) for s in COUNTED) for name in scans), shown
        assert not any(node["Node Type"] == "Seq Scan" for node in _nodes(plan)), shown
        # The queue's own range of the pending index: not `default`'s thousands.
        pending = scans[TRAITS[Status.PENDING].index]
        read = pending["Actual Rows"] + pending.get("Rows Removed by Filter", 0)
        assert read <= SMALL_ROWS, shown
