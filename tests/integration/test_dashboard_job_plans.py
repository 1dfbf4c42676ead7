"""The statements behind a job's dashboard page among many finished rows: its read (the
page, its refreshed status part, an action's confirmation) and its actions (retry,
cancel, discard, and the read that explains a refusal) each look one job up by its key,
never by a scan, whatever the table holds.

The statements explained are the ones the store sends, captured from its engine, as
planned for the values given and as a reused generic plan (see `tests/support/plans.py`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from uuid import UUID

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.errors import JobNotFound
from jobqueue.domain.job import Job
from tests.support.plans import (
    FINISHED_ROWS,
    capture_statements,
    custom_and_generic_plans,
    fill_table,
    uses_index,
)

# What the page's routes call on the store, each with the id of a job (or of none).
PAGE_CALLS: dict[str, Callable[[PostgresJobStore, UUID], Awaitable[Job]]] = {
    "read": PostgresJobStore.get,
    "retry": PostgresJobStore.retry,
    "cancel": PostgresJobStore.cancel,
    "discard": PostgresJobStore.delete,
}


@pytest.fixture(scope="module")
def big_table(database_url: str) -> str:
    """This module's database holding many finished jobs and a few live ones."""
    fill_table(database_url, [("completed", FINISHED_ROWS, 1), ("failed", FINISHED_ROWS // 10, 1)])
    return database_url


async def test_every_statement_of_the_job_page_reads_one_job_by_its_key(
    plan_engine: AsyncEngine,
) -> None:
    # One test for every call: the table is filled once per xdist worker. An unknown id
    # sends the refused action's explaining read too.
    store = PostgresJobStore(plan_engine)
    for name, call in PAGE_CALLS.items():
        with capture_statements(plan_engine) as sent, pytest.raises(JobNotFound):
            await call(store, UUID(int=0))
        statements = [(s, p) for s, p in sent if "jobs" in s]
        assert statements, name

        for statement, parameters in statements:
            for plan in await custom_and_generic_plans(plan_engine, statement, parameters):
                assert uses_index(plan, "pk_jobs"), f"{name}:\n{plan}"
                assert "Seq Scan on jobs" not in plan, f"{name}:\n{plan}"
