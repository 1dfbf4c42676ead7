"""The jobs browser's statements among many rows of other statuses and types: every
filter combination reads a bounded number of rows, measured by EXPLAIN ANALYZE (the rows
each scan of `jobs` produced or filtered out, over all its loops), and never scans the
whole table, as planned for the values given and as a generic plan.

The table: 200,000 completed jobs of one type and 20,000 of five others, 20,000 failed,
20,000 scheduled pending jobs, a few of every other status. A search that matches
nothing is the worst case: it reads its whole budget.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.listing import (
    SEARCH_BUDGET,
    JobQuery,
    KeyKind,
    KeyLookup,
    Search,
    bounded_query,
)
from jobqueue.domain.status import TRAITS, SortColumn, Status
from tests.support.plans import (
    FINISHED_ROWS,
    capture_statements,
    custom_and_generic_plans,
    fill_table,
)

LIMIT = 50
# A page reads its rows, one more, and one index descent per type it merges; what is
# left is slack for the loose scan over types. A search reads its budget in index order,
# or, where the planner finds it cheaper, a range a few times the budget whole (a bitmap
# scan and a sort): never the status's every row.
PAGE_BOUND = 1_000
SEARCH_BOUND = 3 * SEARCH_BUDGET
A_DAY_AGO = datetime.now(UTC) - timedelta(days=1)


@pytest.fixture(scope="module")
def big_table(database_url: str) -> str:
    fill_table(
        database_url,
        [
            ("completed", FINISHED_ROWS, 1),
            ("failed", 20_000, 1),
            ("dead_letter", 20_000, 1),
            ("cancelled", 50, 1),
        ],
        scheduled=20_000,
    )
    asyncio.run(_more_types(database_url))
    return database_url


async def _more_types(database_url: str) -> None:
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.begin() as connection:
            await connection.execute(
                text(
                    "INSERT INTO jobs (type, status, attempts, max_attempts, queue, updated_at,"
                    "                  last_error)"
                    " SELECT 'kind-' || (n % 5), 'completed', 1, 3, 'q' || (n % 20),"
                    "        now() - make_interval(secs => n), NULL"
                    " FROM generate_series(1, 20000) AS n"
                )
            )
            await connection.execute(text("ANALYZE jobs"))
    finally:
        await engine.dispose()


def _shapes(status: Status) -> Iterator[tuple[str, JobQuery]]:
    """Every filter combination the browser can send for `status`, as it sends them
    (`bounded_query`): a type and a queue of every job, of none, and neither."""
    finished = TRAITS[status].order.column is SortColumn.UPDATED_AT
    ranges = [(None, None), (A_DAY_AGO, None), (None, A_DAY_AGO)] if finished else [(None, None)]
    searches: list[dict[str, Any]] = [
        {},
        {"error": "no such error"},
        {"created_from": A_DAY_AGO, "created_until": A_DAY_AGO + timedelta(hours=1)},
    ]
    for job_type, queue, (start, end), search in itertools.product(
        (None, "done", "rare"), (None, "default", "rare"), ranges, searches
    ):
        query = bounded_query(
            status,
            type=job_type,
            queue=queue,
            limit=LIMIT,
            finished_from=start,
            finished_until=end,
            **search,
        )
        yield f"{status} type={job_type} queue={queue} finished={start},{end} {search}", query


async def _sent(engine: AsyncEngine, call: Any) -> tuple[str, Sequence[Any]]:
    with capture_statements(engine) as sent:
        await call
    [(statement, parameters)] = [(s, p) for s, p in sent if "jobs" in s]
    return statement, parameters


async def _rows_read(engine: AsyncEngine, statement: str, parameters: Sequence[Any]) -> int:
    """How many rows of `jobs` the statement's scans touched, run for real."""
    async with engine.connect() as connection:
        result = await connection.exec_driver_sql(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, tuple(parameters)
        )
        document = result.scalar_one()
        await connection.rollback()
    plan = json.loads(document) if isinstance(document, str) else document
    return _read(plan[0]["Plan"])


def _read(node: dict[str, Any]) -> int:
    own = 0
    if node.get("Relation Name") == "jobs":
        touched = node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)
        touched += node.get("Rows Removed by Index Recheck", 0)
        own = int(touched * node.get("Actual Loops", 1))
    return own + sum(_read(child) for child in node.get("Plans", []))


async def _check(engine: AsyncEngine, shape: str, call: Any, bound: int) -> None:
    statement, parameters = await _sent(engine, call)
    read = await _rows_read(engine, statement, parameters)
    assert read <= bound, f"{shape} read {read} rows, more than {bound}:\n{statement}"
    for plan in await custom_and_generic_plans(engine, statement, parameters):
        assert "Seq Scan on jobs" not in plan, f"{shape}:\n{plan}"


async def test_every_filter_combination_reads_a_bounded_number_of_rows(
    plan_engine: AsyncEngine,
) -> None:
    # One test for every shape: the table is filled once per xdist worker.
    store = PostgresJobStore(plan_engine)
    for status in Status:
        for shape, query in _shapes(status):
            bound = PAGE_BOUND if query.search is None else SEARCH_BOUND
            await _check(plan_engine, shape, store.list_jobs(query), bound)
            first = await store.list_jobs(query)
            if first.next is None:
                continue
            # Pages after and before a position read no more than the first.
            later = JobQuery(**{**_fields(query), "after": first.next})
            await _check(plan_engine, f"{shape} after", store.list_jobs(later), bound)
            second = await store.list_jobs(later)
            if second.previous is not None:
                back = JobQuery(**{**_fields(query), "before": second.previous})
                await _check(plan_engine, f"{shape} before", store.list_jobs(back), bound)


def _fields(query: JobQuery) -> dict[str, Any]:
    return {name: getattr(query, name) for name in JobQuery.__slots__}


async def test_a_search_that_matches_nothing_stops_at_its_budget_and_says_so(
    plan_engine: AsyncEngine,
) -> None:
    store = PostgresJobStore(plan_engine)

    single = await store.list_jobs(JobQuery(Status.COMPLETED, "done", search=Search(error="x!")))
    merged = await store.list_jobs(JobQuery(Status.COMPLETED, search=Search(error="x!")))

    assert single.jobs == ()
    assert single.searched == SEARCH_BUDGET
    assert single.next is not None
    assert merged.jobs == ()
    # Each type's share of the budget, as far as every type was read in full.
    assert merged.searched is not None
    assert 0 < merged.searched <= SEARCH_BUDGET
    assert merged.next is not None


async def test_a_job_is_found_by_its_key_through_the_keys_index(plan_engine: AsyncEngine) -> None:
    store = PostgresJobStore(plan_engine)
    for lookup, index in (
        (KeyLookup(KeyKind.IDEMPOTENCY, "nobody's"), "uq_jobs_idempotency_key"),
        (KeyLookup(KeyKind.UNIQUE, "nobody's"), "uq_jobs_unique_key"),
    ):
        statement, parameters = await _sent(plan_engine, store.find_by_key(lookup))
        assert await _rows_read(plan_engine, statement, parameters) <= 1
        for plan in await custom_and_generic_plans(plan_engine, statement, parameters):
            assert index in plan, plan
