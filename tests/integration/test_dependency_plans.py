"""The statements of jobs that wait for jobs, among many rows: a graph's lock and mark of
the stored jobs it depends on and a handler's read of their results go by primary key; a
workflow's read, its cancel and its retry read the workflow's jobs through
`ix_jobs_workflow`, as many as it has, never the table; and the release the ending's
statement does (migrations 0024 to 0026's triggers) reads in proportion to the dependents
of the job that ended, sharing a count or not, not to the table, nor to the other jobs
waiting.

Each statement is explained as planned for its values and as the generic plan a prepared
statement may switch to (`tests/support/plans.py`); the release runs in both plan modes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.queries.dependencies import (
    DEPENDENCY_RESULTS,
    LOCK_DEPENDENCIES,
    MARK_DEPENDENCIES,
)
from jobqueue.adapters.postgres.queries.jobs import RECORD_ENDINGS
from jobqueue.adapters.postgres.queries.workflows import (
    CANCEL_WORKFLOW,
    RETRY_WORKFLOW,
    WORKFLOW_EXISTS,
    WORKFLOW_JOBS,
)
from jobqueue.adapters.postgres.statement import Statement
from jobqueue.adapters.postgres.store import PostgresJobStore, ending_values
from jobqueue.domain.dependencies import MAX_WORKFLOW_JOBS, Step
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.outcome import Decision
from jobqueue.domain.status import Status
from tests.support.plans import (
    FINISHED_ROWS,
    custom_and_generic_plans,
    fill_table,
    statement_rows_read,
    uses_index,
)

# Other workflows beside the finished jobs: each a pending root due tomorrow and the jobs
# waiting for it, on a count each (an edge each) in half of them, on one shared count in
# the other half. A release or a workflow's statement that read them (or
# `job_dependencies`, `ix_jobs_waiting` or `ix_jobs_wait_id`) rather than its own would
# show.
WORKFLOWS = 1_000
WORKFLOW_SIZE = 100
# The dependents of the job whose ending is measured.
DEPENDENTS = 100
LEASE = timedelta(minutes=5)
# What the release may ask of the buffers per dependent (about 25 measured).
BUFFERS_PER_DEPENDENT = 40


@pytest.fixture(scope="module")
def big_table(database_url: str) -> str:
    """This module's database: many finished jobs, a few live ones, and WORKFLOWS
    workflows of WORKFLOW_SIZE jobs waiting for their roots."""
    fill_table(database_url, [("completed", FINISHED_ROWS, 1)])
    asyncio.run(_add_workflows(database_url))
    return database_url


async def _add_workflows(url: str) -> None:
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.begin() as connection:
            await connection.exec_driver_sql(_OTHER_WORKFLOWS)
        async with engine.connect() as connection:
            await connection.exec_driver_sql("ANALYZE jobs")
            await connection.exec_driver_sql("ANALYZE job_dependencies")
            await connection.exec_driver_sql("ANALYZE job_waits")
            await connection.commit()
    finally:
        await engine.dispose()


_OTHER_WORKFLOWS = f"""
    WITH workflow AS (
        SELECT md5('workflow ' || n)::uuid AS id, md5('root ' || n)::uuid AS root,
            CASE WHEN n % 2 = 0 THEN md5('wait ' || n)::uuid END AS wait_id
        FROM generate_series(1, {WORKFLOWS}) AS n
    ),
    roots AS (
        INSERT INTO jobs (id, type, status, max_attempts, run_at, workflow_id, has_dependents)
        SELECT root, 'other root', 'pending', 3, now() + interval '1 day', id, true
        FROM workflow
    ),
    steps AS (
        INSERT INTO jobs (
            type, status, max_attempts, workflow_id, depends_on, waiting_for, wait_id
        )
        SELECT 'other step', 'waiting', 3, workflow.id, ARRAY[workflow.root], 1,
            workflow.wait_id
        FROM workflow, generate_series(2, {WORKFLOW_SIZE})
        RETURNING id, depends_on[1] AS root, wait_id
    ),
    -- Their counts and edges, as a graph's insert writes them (migrations 0025, 0026).
    counts AS (
        SELECT DISTINCT coalesce(wait_id, id) AS id, root FROM steps
    ),
    counted AS (INSERT INTO job_waits (job_id, remaining) SELECT id, 1 FROM counts)
    INSERT INTO job_dependencies (depends_on, job_id) SELECT root, id FROM counts
"""


async def _fan_out(
    engine: AsyncEngine, name: str, dependents: int = DEPENDENTS, *, shared: bool = True
) -> list[Job]:
    """A new workflow: a root (type `name`) and `dependents` jobs waiting for it, on one
    shared count; or, not `shared`, each on its own (each also after a stored job of its
    own, completed: not waited for, but a set of dependencies apart)."""
    apart: list[tuple[str, ...]] = [()] * dependents
    if not shared:
        async with engine.begin() as connection:
            done = await connection.execute(
                text(
                    "INSERT INTO jobs (type, status, max_attempts)"
                    " SELECT 'done', 'completed', 1 FROM generate_series(1, :n) RETURNING id"
                ),
                {"n": dependents},
            )
            apart = [(str(row.id),) for row in done]
    steps = [Step(NewJob.build(type=name, max_attempts=1), name="root")]
    steps += [
        Step(NewJob.build(type=f"{name} step", max_attempts=1), after=("root", *own))
        for own in apart
    ]
    return [each.job for each in await PostgresJobStore(engine).submit_graph(steps)]


def _workflow(job: Job) -> UUID:
    assert job.workflow_id is not None
    return job.workflow_id


async def _read_by(
    engine: AsyncEngine, statement: Statement, values: Mapping[str, Any], index: str, most: int
) -> int:
    """Assert that `statement` reads `jobs` through `index` (never the whole table) as
    planned and as a generic plan, and at most `most` of its rows; the rows read."""
    for plan in await custom_and_generic_plans(
        engine, statement.numbered, statement.arguments(values)
    ):
        assert uses_index(plan, index), f"{statement.name}:\n{plan}"
        assert "Seq Scan on jobs" not in plan, f"{statement.name}:\n{plan}"
    read = await statement_rows_read(engine, statement, values)
    print(f"\n{statement.name}: {read.rows} rows")  # the figures, with -s
    assert read.rows <= most, f"{statement.name}: {read.rows} rows\n{read.plan}"
    return read.rows


async def test_a_graph_s_stored_dependencies_and_their_results_are_read_by_key(
    plan_engine: AsyncEngine,
) -> None:
    root, *waiting = await _fan_out(plan_engine, "keyed")
    ids = sorted(job.id for job in [root, *waiting[:19]])
    values = {"ids": ids, "workflow_id": root.workflow_id}
    for statement in (LOCK_DEPENDENCIES, MARK_DEPENDENCIES, DEPENDENCY_RESULTS):
        # One row per id: each looked up, none scanned past.
        assert await _read_by(plan_engine, statement, values, "pk_jobs", len(ids)) == len(ids)


async def test_a_workflow_s_statements_read_its_jobs_not_the_table(
    plan_engine: AsyncEngine,
) -> None:
    root, *waiting = await _fan_out(plan_engine, "flow")
    size = 1 + len(waiting)
    values = {"workflow_id": _workflow(root), "limit": MAX_WORKFLOW_JOBS}
    index = "ix_jobs_workflow"

    assert await _read_by(plan_engine, WORKFLOW_JOBS, values, index, size) == size
    assert await _read_by(plan_engine, WORKFLOW_EXISTS, values, index, 1) == 1
    # Its live jobs read, then each cancelled by key (the release finds them ended).
    await _read_by(plan_engine, CANCEL_WORKFLOW, values, index, 2 * size)

    store = PostgresJobStore(plan_engine)
    assert await store.cancel_workflow(_workflow(root)) == size
    # Its jobs read twice (those to retry, those still waiting: none), each retried by
    # key, and their distinct dependencies (the root) looked up by key.
    await _read_by(plan_engine, RETRY_WORKFLOW, values, index, 3 * size + 1)
    for plan in await custom_and_generic_plans(
        plan_engine, RETRY_WORKFLOW.numbered, RETRY_WORKFLOW.arguments(values)
    ):
        assert uses_index(plan, "pk_jobs"), plan
        assert "Seq Scan on job" not in plan, plan


# Per relation of the schema, what this transaction did so far: buffers asked for, scans
# (sequential ones, for a table), tuples returned by them and rows updated.
_COUNTERS = """
    SELECT c.relname,
        pg_stat_get_xact_blocks_fetched(c.oid) AS blocks,
        pg_stat_get_xact_numscans(c.oid) AS scans,
        pg_stat_get_xact_tuples_returned(c.oid) AS returned,
        pg_stat_get_xact_tuples_updated(c.oid) AS updated
    FROM pg_class c
    WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'i')
"""


async def _counters(connection: AsyncConnection) -> dict[str, tuple[int, ...]]:
    rows = await connection.exec_driver_sql(_COUNTERS)
    return {row[0]: tuple(row[1:]) for row in rows}


async def _measured_ending(
    engine: AsyncEngine, values: Mapping[str, Any], plan_mode: str
) -> tuple[dict[str, tuple[int, ...]], int]:
    """RECORD_ENDINGS with `values`, in a transaction rolled back afterwards, with the
    trigger's statements planned in `plan_mode`: what it did per relation (buffers,
    scans, tuples returned, rows updated), and how many jobs were pending after it."""
    statement = RECORD_ENDINGS.numbered
    async with engine.connect() as connection:
        await connection.exec_driver_sql(f"SET LOCAL plan_cache_mode = {plan_mode}")
        before = await _counters(connection)
        ended = await connection.exec_driver_sql(statement, tuple(RECORD_ENDINGS.arguments(values)))
        assert len(ended.all()) == 1
        after = await _counters(connection)
        pending = await connection.scalar(
            text("SELECT count(*) FROM jobs WHERE status = 'pending' AND type = 'released step'")
        )
        await connection.rollback()
    done = {
        name: tuple(now - was for now, was in zip(after[name], before[name], strict=True))
        for name in after
    }
    return done, int(pending or 0)


@pytest.mark.parametrize("shared", [True, False], ids=["one shared count", "a count each"])
async def test_an_ending_releases_its_dependents_reading_as_many_rows_as_they_are(
    plan_engine: AsyncEngine, shared: bool
) -> None:
    store = PostgresJobStore(plan_engine)
    root, *waiting = await _fan_out(plan_engine, "released", shared=shared)
    [claimed] = await store.claim(1, LEASE, types=["released"])
    assert claimed.id == root.id
    values = ending_values([(claimed.lease, Decision.complete())])

    # The ending itself looks its job up by key.
    for plan in await custom_and_generic_plans(
        plan_engine, RECORD_ENDINGS.numbered, RECORD_ENDINGS.arguments(values)
    ):
        assert uses_index(plan, "pk_jobs"), plan
        assert "Seq Scan on jobs" not in plan, plan

    async with plan_engine.connect() as connection:
        pages = await connection.scalar(
            text("SELECT relpages FROM pg_class WHERE relname = 'jobs'")
        )
        edges = await connection.scalar(text("SELECT count(*) FROM job_dependencies"))
    assert edges >= WORKFLOWS // 2 * (WORKFLOW_SIZE - 1)
    # The bound on buffers below is the table's to break: a scan of it breaks it.
    assert pages > BUFFERS_PER_DEPENDENT * DEPENDENTS
    for plan_mode in ("force_custom_plan", "force_generic_plan"):
        done, pending = await _measured_ending(plan_engine, values, plan_mode)
        touched = {name: counts for name, counts in done.items() if any(counts)}
        blocks = sum(counts[0] for counts in done.values())
        print(f"\n{plan_mode}: {blocks} buffers, jobs {pages} pages: {touched}")  # the figures
        # The trigger's work is in the counts: the ending and its dependents written.
        assert pending == DEPENDENTS, plan_mode
        assert done["jobs"][3] == 1 + DEPENDENTS, (plan_mode, touched)
        # No table read whole, and no more tuples read than the edges and the jobs they
        # name, a few times over (the edges' index, the lock, the count and its row
        # dropped once released, the job looked up, then updated): the other workflows'
        # edges and waiting jobs are never read.
        assert (done["jobs"][1], done["job_dependencies"][1]) == (0, 0), (plan_mode, touched)
        written = 1 if shared else DEPENDENTS
        assert (done["job_waits"][1], done["job_waits"][3]) == (0, written), touched
        assert sum(counts[2] for counts in done.values()) <= 7 * DEPENDENTS, (plan_mode, touched)
        # Buffers: a couple of dozen per dependent (its row, its edge, its new entries in
        # every index that holds it: a status write is no HOT update).
        assert blocks <= BUFFERS_PER_DEPENDENT * DEPENDENTS, (plan_mode, blocks, touched)

    # Cancelled, the root cancels its dependents with it.
    await store.cancel(root.id)
    fan = {root.id, *(job.id for job in waiting)}
    statuses = {job.id: job.status for job in await store.workflow(_workflow(root))}
    assert {i: statuses[i] for i in fan} == dict.fromkeys(fan, Status.CANCELLED)
