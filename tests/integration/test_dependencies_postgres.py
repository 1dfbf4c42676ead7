"""Jobs that wait for jobs, against a real PostgreSQL: a graph stored in one transaction
(or refused whole), dependents released by whatever statement ends their dependencies
(a worker's ending, a cancel, recovery, a delete), cancelled when one does not complete
unless they run anyway, and a workflow's view, cancel and retry."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from uuid import UUID, uuid4

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

import jobqueue
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.dependencies import (
    DependencyCycle,
    DependencyEnded,
    DependencyError,
    Step,
    UnknownDependency,
    WorkflowNotFound,
)
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.outcome import Decision
from jobqueue.domain.status import Status
from tests.support.endings import record

LEASE = timedelta(seconds=30)


@pytest.fixture
def store(engine: AsyncEngine) -> PostgresJobStore:
    return PostgresJobStore(engine)


def _new(kind: str = "step", **options: object) -> NewJob:
    return NewJob.build(type=kind, max_attempts=1, **options)  # type: ignore[arg-type]


async def _graph(store: PostgresJobStore, *steps: Step) -> list[Job]:
    return [each.job for each in await store.submit_graph(steps)]


async def _statuses(store: PostgresJobStore, jobs: Sequence[Job]) -> list[Status]:
    return [(await store.get(job.id)).status for job in jobs]


async def _run(store: PostgresJobStore, kind: str, decision: Decision) -> list[Job]:
    """Claim every due job of `kind` and end each with `decision`."""
    claimed = await store.claim(100, LEASE, types=[kind])
    return [await record(store, job.lease, decision) for job in claimed]


async def _rows(engine: AsyncEngine, table: str) -> int:
    """How many rows `table` holds: `job_waits` one per waiting job, `job_dependencies`
    one per edge, kept until its dependency is deleted."""
    async with engine.connect() as connection:
        return int((await connection.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one())


async def test_a_chain_runs_in_order_each_released_by_the_ending(
    store: PostgresJobStore, engine: AsyncEngine
) -> None:
    a, b, c = await _graph(
        store,
        Step(_new("a"), name="a"),
        Step(_new("b"), name="b", after=("a",)),
        Step(_new("c"), name="c", after=("b",)),
    )
    assert [a.status, b.status, c.status] == [Status.PENDING, Status.WAITING, Status.WAITING]
    assert b.depends_on == (a.id,)
    assert c.waiting_for == 1
    assert a.workflow_id is not None
    assert {b.workflow_id, c.workflow_id} == {a.workflow_id}
    # Nothing but `a` can be claimed.
    assert [job.id for job in await store.claim(10, LEASE, types=["b", "c"])] == []
    (_done,) = await _run(store, "a", Decision.complete('{"pages": 3}'))
    assert await _statuses(store, [b, c]) == [Status.PENDING, Status.WAITING]
    await _run(store, "b", Decision.complete())
    await _run(store, "c", Decision.complete())
    assert await _statuses(store, [a, b, c]) == [Status.COMPLETED] * 3
    assert (await _rows(engine, "job_waits"), await _rows(engine, "job_dependencies")) == (0, 2)
    await store.delete(a.id)
    assert await _rows(engine, "job_dependencies") == 1


async def test_a_fan_in_waits_for_every_dependency(store: PostgresJobStore) -> None:
    *parts, merge = await _graph(
        store,
        *(Step(_new("part", payload={"n": n}), name=f"p{n}") for n in range(5)),
        Step(_new("merge"), after=tuple(f"p{n}" for n in range(5))),
    )
    assert merge.waiting_for == 5
    claimed = await store.claim(3, LEASE, types=["part"])
    for job in claimed:
        await record(store, job.lease, Decision.complete(json.dumps(job.payload)))
    assert (await store.get(merge.id)).waiting_for == 2
    await _run(store, "part", Decision.complete())
    merged = await store.get(merge.id)
    assert merged.status is Status.PENDING
    assert merged.waiting_for == 0
    results = await store.dependency_results(merge.depends_on or ())
    assert [each.id for each in results] == [part.id for part in parts]
    assert all(each.completed for each in results)
    numbers = [r.result["n"] for r in results if isinstance(r.result, dict)]
    assert sorted(n for n in numbers if isinstance(n, int)) == [0, 1, 2]


async def test_a_failed_dependency_cancels_its_dependents_down_the_graph(
    store: PostgresJobStore,
) -> None:
    a, b, c, anyway = await _graph(
        store,
        Step(_new("a"), name="a"),
        Step(_new("b"), name="b", after=("a",)),
        Step(_new("c"), name="c", after=("b",)),
        Step(_new("callback", run_anyway=True), after=("c", "a")),
    )
    await _run(store, "a", Decision.fail("boom"))
    b_now, c_now, anyway_now = [await store.get(job.id) for job in (b, c, anyway)]
    assert [b_now.status, c_now.status] == [Status.CANCELLED, Status.CANCELLED]
    assert b_now.last_error == f"job {a.id} it depends on ended failed"
    assert c_now.last_error == f"job {b.id} it depends on ended cancelled"
    # The callback ran anyway, once both ended, and reads how each did.
    assert anyway_now.status is Status.PENDING
    results = {each.id: each for each in await store.dependency_results((c.id, a.id))}
    assert results[a.id].status is Status.FAILED
    assert results[a.id].error == "boom"
    assert results[c.id].status is Status.CANCELLED


@pytest.mark.parametrize("how", ["cancel", "delete", "dead_letter", "recovery"])
async def test_every_way_a_dependency_ends_reaches_its_dependents(
    store: PostgresJobStore, engine: AsyncEngine, how: str
) -> None:
    first, then = await _graph(
        store, Step(_new("first"), name="first"), Step(_new("then"), after=("first",))
    )
    if how == "cancel":
        await store.cancel(first.id)
    elif how == "delete":
        await store.delete(first.id)
    elif how == "dead_letter":
        (claimed,) = await store.claim(1, LEASE, types=["first"])
        await record(store, claimed.lease, Decision.dead_letter("gave up"))
    else:
        (claimed,) = await store.claim(1, timedelta(milliseconds=1), types=["first"])
        async with engine.begin() as connection:
            await connection.execute(text("SELECT pg_sleep(0.01)"))
        assert len(await store.recover_expired(10)) == 1
    assert (await store.get(then.id)).status is Status.CANCELLED


async def test_a_job_may_depend_on_stored_jobs_and_joins_their_workflow(
    store: PostgresJobStore, engine: AsyncEngine
) -> None:
    done = (await store.submit(_new("done"))).job
    live = (await store.submit(_new("live"))).job
    await _run(store, "done", Decision.complete())
    dependent = (await store.submit(_new("dependent", depends_on=[done.id, live.id]))).job
    assert dependent.status is Status.WAITING
    assert dependent.waiting_for == 1
    jobs = await store.workflow(dependent.workflow_id or uuid4())
    assert [job.id for job in jobs] == [done.id, live.id, dependent.id]
    # In-process, in the caller's transaction, the same way in.
    async with engine.begin() as connection:
        submitted = await jobqueue.enqueue(connection, _new("more", depends_on=[live.id]))
    more = submitted.job
    assert more.status is Status.WAITING
    assert more.workflow_id == dependent.workflow_id
    await _run(store, "live", Decision.complete())
    assert await _statuses(store, [dependent, more]) == [Status.PENDING, Status.PENDING]


async def test_a_graph_that_cannot_run_is_refused_and_stores_nothing(
    store: PostgresJobStore, engine: AsyncEngine
) -> None:
    failed = (await store.submit(_new("failed"))).job
    await _run(store, "failed", Decision.fail("no"))
    refusals: list[tuple[tuple[Step, ...], type[DependencyError]]] = [
        (
            (
                Step(_new(), name="x", after=("z",)),
                Step(_new(), name="y", after=("x",)),
                Step(_new(), name="z", after=("y",)),
            ),
            DependencyCycle,
        ),
        ((Step(_new(), name="self", after=("self",)),), DependencyCycle),
        ((Step(_new(), after=("nobody",)),), UnknownDependency),
        ((Step(_new(), after=(str(uuid4()),)),), UnknownDependency),
        ((Step(_new(), name="a"), Step(_new(), name="a")), DependencyError),
        ((Step(_new(), after=(str(failed.id),)),), DependencyEnded),
    ]
    for steps, error in refusals:
        with pytest.raises(error):
            await store.submit_graph(steps)
    async with engine.connect() as connection:
        count = (await connection.execute(text("SELECT count(*) FROM jobs"))).scalar_one()
    assert count == 1
    assert (await _rows(engine, "job_waits"), await _rows(engine, "job_dependencies")) == (0, 0)
    # Run anyway, a failed dependency is no refusal: it already ended.
    (callback,) = await _graph(store, Step(_new(run_anyway=True), after=(str(failed.id),)))
    assert callback.status is Status.PENDING


async def test_a_workflow_is_cancelled_and_its_failed_steps_retried(
    store: PostgresJobStore, engine: AsyncEngine
) -> None:
    a, b, c = await _graph(
        store,
        Step(_new("a"), name="a"),
        Step(_new("b"), name="b", after=("a",)),
        Step(_new("c"), name="c", after=("a", "b")),
    )
    workflow = a.workflow_id
    assert workflow is not None
    await _run(store, "a", Decision.fail("first try"))
    assert await _statuses(store, [a, b, c]) == [Status.FAILED, Status.CANCELLED, Status.CANCELLED]
    assert await store.retry_workflow(workflow) == 3
    a2, b2, c2 = [await store.get(job.id) for job in (a, b, c)]
    assert (a2.status, b2.status, c2.status) == (Status.PENDING, Status.WAITING, Status.WAITING)
    assert (b2.waiting_for, c2.waiting_for) == (1, 2)
    await _run(store, "a", Decision.complete())
    await _run(store, "b", Decision.complete())
    await _run(store, "c", Decision.complete())
    assert await _statuses(store, [a, b, c]) == [Status.COMPLETED] * 3
    assert await store.retry_workflow(workflow) == 0

    d, e = await _graph(store, Step(_new("d"), name="d"), Step(_new("e"), after=("d",)))
    assert d.workflow_id is not None
    assert await store.cancel_workflow(d.workflow_id) == 2
    assert await _statuses(store, [d, e]) == [Status.CANCELLED, Status.CANCELLED]
    with pytest.raises(WorkflowNotFound):
        await store.workflow(uuid4())
    with pytest.raises(WorkflowNotFound):
        await store.cancel_workflow(uuid4())
    assert await _rows(engine, "job_waits") == 0


def _ids(jobs: Sequence[Job]) -> list[UUID]:
    return [job.id for job in jobs]


async def _callback_after_a_failed(store: PostgresJobStore) -> list[Job]:
    """`a` (failed), `b` (due in an hour) and a callback after both, waiting for `b`."""
    jobs = await _graph(
        store,
        Step(_new("a"), name="a"),
        Step(_new("b", delay=timedelta(hours=1)), name="b"),
        Step(_new("callback", run_anyway=True), after=("a", "b")),
    )
    await _run(store, "a", Decision.fail("first try"))
    assert (await store.get(jobs[2].id)).waiting_for == 1
    return jobs


async def test_a_waiting_callback_waits_again_for_the_steps_a_retry_runs_again(
    store: PostgresJobStore,
) -> None:
    a, _b, callback = await _callback_after_a_failed(store)
    assert a.workflow_id is not None
    assert await store.retry_workflow(a.workflow_id) == 1
    assert (await store.get(callback.id)).waiting_for == 2
    await _run(store, "a", Decision.complete())
    waiting = await store.get(callback.id)
    assert (waiting.status, waiting.waiting_for) == (Status.WAITING, 1)


async def test_a_retried_dependency_is_waited_for_again_by_the_jobs_that_counted_it(
    store: PostgresJobStore, engine: AsyncEngine
) -> None:
    a, b, callback = await _callback_after_a_failed(store)
    # An operator's retry of `a` alone: the callback counted its ending, and waits for
    # the next one.
    await store.retry(a.id)
    assert (await store.get(callback.id)).waiting_for == 2
    await _run(store, "a", Decision.complete())
    assert (await store.get(callback.id)).waiting_for == 1
    # A live dependency deleted counts as ended `deleted`: run anyway, the callback runs;
    # the deleted job's edges go with it, and the callback's count with its waiting.
    await store.delete(b.id)
    released = await store.get(callback.id)
    assert (released.status, released.waiting_for) == (Status.PENDING, 0)
    assert (await _rows(engine, "job_waits"), await _rows(engine, "job_dependencies")) == (0, 1)
    # A job that ended long ago, deleted (retention), takes its edges too.
    await store.delete(a.id)
    assert await _rows(engine, "job_dependencies") == 0


async def test_a_waiting_job_cancelled_or_deleted_stops_being_counted(
    store: PostgresJobStore, engine: AsyncEngine
) -> None:
    # Each waits for dependencies of its own, and so on a count of its own.
    root, other, cancelled, deleted, kept = await _graph(
        store,
        Step(_new("root"), name="root"),
        Step(_new("root"), name="other"),
        Step(_new("cancelled"), after=("root",)),
        Step(_new("deleted"), after=("other",)),
        Step(_new("kept"), after=("root", "other")),
    )
    assert await _rows(engine, "job_waits") == 3
    await store.cancel(cancelled.id)
    await store.delete(deleted.id)
    assert await _rows(engine, "job_waits") == 1
    await _run(store, "root", Decision.complete())
    assert await _statuses(store, [root, other, cancelled, kept]) == [
        Status.COMPLETED,
        Status.COMPLETED,
        Status.CANCELLED,
        Status.PENDING,
    ]
    assert await _rows(engine, "job_waits") == 0
