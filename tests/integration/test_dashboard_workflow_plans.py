"""The statements behind a workflow's dashboard page among many rows: its page, its
refreshed status part and its actions' confirmations send one statement, the store's
read of the workflow's jobs (`WORKFLOW_JOBS`), and an action that finds nothing to do
sends the action's and that read; each reads the workflow's own jobs through
`ix_jobs_workflow`, never the table, however many finished jobs and other workflows it
holds.

The statements explained are the ones the app sends, captured from its engine, as
planned for the values given and as a reused generic plan (see `tests/support/plans.py`).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any
from uuid import UUID

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.dependencies import Step
from jobqueue.domain.job import NewJob
from tests.support.api import build_api
from tests.support.plans import (
    FINISHED_ROWS,
    capture_statements,
    custom_and_generic_plans,
    fill_table,
    rows_read,
    statement_names,
    uses_index,
)

# Other workflows beside the finished jobs, each a pending root and steps waiting for it:
# a read that took theirs (or every waiting job) would show in the rows read.
OTHER_WORKFLOWS = 500
OTHER_SIZE = 40
# The workflow the page shows: a root and the steps waiting for it.
SIZE = 40


@pytest.fixture(scope="module")
def big_table(database_url: str) -> str:
    """This module's database: many finished jobs, a few live ones, and other workflows."""
    fill_table(database_url, [("completed", FINISHED_ROWS, 1)])
    asyncio.run(_other_workflows(database_url))
    return database_url


async def _other_workflows(url: str) -> None:
    engine = create_engine(url, pool_size=1)
    try:
        for _ in range(OTHER_WORKFLOWS // 50):
            await asyncio.gather(*(_workflow(engine, OTHER_SIZE) for _ in range(50)))
        async with engine.connect() as connection:
            await connection.exec_driver_sql("ANALYZE jobs")
            await connection.commit()
    finally:
        await engine.dispose()


async def _workflow(engine: AsyncEngine, size: int) -> UUID:
    steps = [Step(NewJob.build(type="root", max_attempts=1), name="root")]
    steps += [
        Step(NewJob.build(type="step", max_attempts=1), after=("root",)) for _ in range(size - 1)
    ]
    submitted = await PostgresJobStore(engine).submit_graph(steps)
    workflow_id = submitted[0].job.workflow_id
    assert workflow_id is not None
    return workflow_id


async def _sent(
    client: AsyncTestClient[Any], engine: AsyncEngine, method: str, path: str, **sent: Any
) -> list[tuple[str, Sequence[Any]]]:
    """The statements on `jobs` the app sends to answer `method path`."""
    with capture_statements(engine) as statements:
        answer = await client.request(method, path, follow_redirects=False, **sent)
    assert answer.status_code in (200, 409), f"{path}: {answer.text[:500]}"
    return [(statement, parameters) for statement, parameters in statements if "jobs" in statement]


async def test_the_workflow_page_reads_its_own_jobs_by_its_index(
    big_table: str, plan_engine: AsyncEngine
) -> None:
    # One test for every route: the table is filled once per xdist worker.
    workflow = await _workflow(plan_engine, SIZE)
    api = build_api(big_table)
    assert api.engine is not None
    names = statement_names()
    page = f"/ui/workflows/{workflow}"
    async with AsyncTestClient(app=api.app) as client:
        confirmation = await client.get(f"{page}/cancel")
        csrf = re.search(r'name="csrf" value="([^"]+)"', confirmation.text)
        assert csrf, confirmation.text
        await PostgresJobStore(plan_engine).cancel_workflow(workflow)
        sent = {
            "page": await _sent(client, api.engine, "GET", page),
            "status part": await _sent(client, api.engine, "GET", f"{page}/fragments/status"),
            "cancel's confirmation": await _sent(client, api.engine, "GET", f"{page}/cancel"),
            "retry's confirmation": await _sent(client, api.engine, "GET", f"{page}/retry"),
            # Nothing left to cancel: the cancel, whether it exists, and the page again.
            "cancel": await _sent(
                client, api.engine, "POST", f"{page}/cancel", data={"csrf": csrf.group(1)}
            ),
        }

    assert {route: [names.get(s) for s, _ in statements] for route, statements in sent.items()} == {
        "page": ["workflow_jobs"],
        "status part": ["workflow_jobs"],
        "cancel's confirmation": ["workflow_jobs"],
        "retry's confirmation": ["workflow_jobs"],
        "cancel": ["cancel_workflow", "workflow_exists", "workflow_jobs"],
    }
    for route, statements in sent.items():
        for statement, parameters in statements:
            name = names[statement]
            for plan in await custom_and_generic_plans(plan_engine, statement, parameters):
                assert uses_index(plan, "ix_jobs_workflow"), f"{route}: {name}:\n{plan}"
                assert "Seq Scan on jobs" not in plan, f"{route}: {name}:\n{plan}"
            read = await rows_read(plan_engine, statement, parameters)
            assert read.rows <= SIZE, f"{route}: {name} read {read.rows} rows:\n{read.plan}"
