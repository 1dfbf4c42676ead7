"""The dashboard bench's pages on a real table: every signed-in GET route under /ui is
found in the route table and filled from the data (a page whose parameter the bench
cannot fill fails here, not silently in a run), answers 2xx, and every statement it
sends reads a bounded number of rows of `jobs`, by EXPLAIN ANALYZE, however many finished
rows the table holds.

The table is the bench's own (`bench/dashboard/dataset.py`), small: the same mix of
statuses, queues, types, keys and errors as the 5.5M-row run. Pages are requested
through the app in-process; the full-size timing is `jobqueue bench dashboard`'s.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.database import create_engine
from jobqueue.bench.dashboard import dataset
from jobqueue.bench.dashboard.pages import Target, dashboard_routes, targets
from jobqueue.bench.dashboard.run import route_table
from jobqueue.domain.listing import SEARCH_BUDGET
from jobqueue.domain.status import COUNTED
from tests.support.api import build_api
from tests.support.plans import (
    capture_statements,
    custom_and_generic_plans,
    rows_read,
    statement_names,
)

# Enough finished rows that reading a status's rows (or the table) shows far past the
# bound; few enough to fill in seconds.
TABLE = dataset.Dataset(finished=200_000, pending=5_000, processing=20)
# Rows of `jobs` one statement behind a page may read. A page of a listing merged over
# the types (30) reads up to a page per type; far below the 8,000 failed, 4,000 dead
# lettered or cancelled, and 184,000 completed rows of the table.
BOUND = 3_000
# Statements allowed past BOUND, with the bound they keep instead and why.
# The queue summaries count every live and held job (the overview's numbers) from the
# small partial indexes: never a finished row, but every pending and dead-lettered one.
# Where that takes long, pages read the last count and it is redone in the background,
# never per view (`adapters/postgres/queue_counts.py`).
ALLOWED = {"count_by_queue": "counted"}
# A search of the jobs browser (an error's text, a filter no index holds) reads its
# budget in index order, or a range a few times it whole where the planner finds that
# cheaper (test_dashboard_jobs_plans.py holds every filter to it). Its statement is made
# per shape of filters, so it is known by its scan, not by a name.
SEARCH_BOUND = 3 * SEARCH_BUDGET
_SEARCH_SCAN = "AS scanned_rows"


@pytest.fixture(scope="module")
def big_table(database_url: str) -> str:
    """This module's database, filled by the bench's own statements."""

    async def fill() -> None:
        engine = create_engine(database_url, pool_size=1)
        try:
            await dataset.fill(engine, TABLE)
        finally:
            await engine.dispose()

    asyncio.run(fill())
    return database_url


async def _targets(engine: AsyncEngine) -> list[Target]:
    # Raises, naming the page and parameter, for a page the bench cannot fill.
    return targets(dashboard_routes(route_table()), await dataset.samples(engine, TABLE))


async def test_every_dashboard_page_is_found_filled_and_answers(
    big_table: str, plan_engine: AsyncEngine
) -> None:
    urls = await _targets(plan_engine)

    routes = {route.name for route in dashboard_routes(route_table())}
    assert {"ui-overview", "ui-queues-fragment"} <= routes
    assert {target.route for target in urls} == routes, "a page with no URL to time"
    async with AsyncTestClient(app=build_api(big_table).app) as client:
        for target in urls:
            answer = await client.get(target.url)
            assert 200 <= answer.status_code < 300, f"{target.url}: {answer.text[:500]}"


async def _counted_rows(engine: AsyncEngine) -> int:
    async with engine.connect() as connection:
        result = await connection.execute(
            text("SELECT count(*) FROM jobs WHERE status = ANY(:statuses)"),
            {"statuses": [status.value for status in COUNTED]},
        )
        return int(result.scalar_one())


async def test_every_statement_behind_every_page_reads_a_bounded_number_of_rows(
    big_table: str, plan_engine: AsyncEngine
) -> None:
    urls = await _targets(plan_engine)
    bounds = {"counted": await _counted_rows(plan_engine)}
    api = build_api(big_table)
    assert api.engine is not None
    sent: dict[str, list[tuple[str, Sequence[Any]]]] = {}
    async with AsyncTestClient(app=api.app) as client:
        for target in urls:
            with capture_statements(api.engine) as statements:
                assert (await client.get(target.url)).status_code < 300, target.url
            sent[target.url] = [(s, p) for s, p in statements if "jobs" in s]
    assert sent["/ui"], "the overview's statements were not captured"

    names: Mapping[str, str] = statement_names()
    for url, statements in sent.items():
        for statement, parameters in statements:
            name = names.get(statement, "an unnamed statement")
            bound = bounds[ALLOWED[name]] if name in ALLOWED else BOUND
            if _SEARCH_SCAN in statement:
                bound = SEARCH_BOUND
            read = await rows_read(plan_engine, statement, parameters)
            assert read.rows <= bound, f"{url}: {name} read {read.rows:,} rows:\n{read.plan}"
            for plan in await custom_and_generic_plans(plan_engine, statement, parameters):
                assert "Seq Scan on jobs" not in plan, f"{url}: {name}:\n{plan}"
