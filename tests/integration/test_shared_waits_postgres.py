"""Jobs of a graph that wait for the same dependencies share one count (migration 0026),
against a real PostgreSQL: what each job shows and when each is released stay as if
each counted alone, through endings, failures, cancels, deletes and a workflow's retry;
the shared count and its edges are one, and go with the last job waiting on it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.dependencies import Step
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.outcome import Decision
from jobqueue.domain.status import Status
from tests.support.endings import record

LEASE = timedelta(seconds=30)


@pytest.fixture
def store(engine: AsyncEngine) -> PostgresJobStore:
    return PostgresJobStore(engine)


def _new(kind: str, **options: object) -> NewJob:
    return NewJob.build(type=kind, max_attempts=1, **options)  # type: ignore[arg-type]


async def _graph(store: PostgresJobStore, *steps: Step) -> list[Job]:
    return [each.job for each in await store.submit_graph(steps)]


async def _run(store: PostgresJobStore, kind: str, decision: Decision) -> None:
    for job in await store.claim(100, LEASE, types=[kind]):
        await record(store, job.lease, decision)


async def _seen(store: PostgresJobStore, jobs: Sequence[Job]) -> list[tuple[Status, int]]:
    """Each job's status and how many dependencies it still waits for, as read back."""
    return [((got := await store.get(job.id)).status, got.waiting_for) for job in jobs]


async def _rows(engine: AsyncEngine) -> tuple[int, int]:
    """How many counts (`job_waits`) and edges (`job_dependencies`) are stored."""
    async with engine.connect() as connection:
        counts = await connection.execute(text("SELECT count(*) FROM job_waits"))
        edges = await connection.execute(text("SELECT count(*) FROM job_dependencies"))
        return int(counts.scalar_one()), int(edges.scalar_one())


async def test_jobs_waiting_for_the_same_dependencies_share_one_count(
    store: PostgresJobStore, engine: AsyncEngine
) -> None:
    _a, _b, *fan, alone = await _graph(
        store,
        Step(_new("a"), name="a"),
        Step(_new("b"), name="b"),
        *(Step(_new("fan"), after=("a", "b")) for _ in range(3)),
        Step(_new("alone"), after=("a",)),
    )
    # The fan's three on one count with two edges; `alone` on its own, with one.
    assert await _rows(engine) == (2, 3)
    assert await _seen(store, fan) == [(Status.WAITING, 2)] * 3
    await _run(store, "a", Decision.complete())
    assert await _seen(store, [*fan, alone]) == [(Status.WAITING, 1)] * 3 + [(Status.PENDING, 0)]
    assert await _rows(engine) == (1, 3)
    await _run(store, "b", Decision.complete())
    assert await _seen(store, fan) == [(Status.PENDING, 0)] * 3
    assert await _rows(engine) == (0, 3)


async def test_a_shared_count_goes_with_the_last_of_its_jobs_to_stop_waiting(
    store: PostgresJobStore, engine: AsyncEngine
) -> None:
    a, cancelled, deleted, kept = await _graph(
        store,
        Step(_new("a"), name="a"),
        *(Step(_new("fan"), after=("a",)) for _ in range(3)),
    )
    assert await _rows(engine) == (1, 1)
    await store.cancel(cancelled.id)
    await store.delete(deleted.id)
    assert await _rows(engine) == (1, 1)
    assert await _seen(store, [kept]) == [(Status.WAITING, 1)]
    await store.cancel(kept.id)
    assert await _rows(engine) == (0, 1)
    # Its dependency's ending finds nothing to count, and changes nothing.
    await _run(store, "a", Decision.complete())
    assert await _seen(store, [a, cancelled, kept]) == [
        (Status.COMPLETED, 0),
        (Status.CANCELLED, 0),
        (Status.CANCELLED, 0),
    ]


async def test_a_failure_cancels_the_jobs_sharing_a_count_but_those_run_anyway(
    store: PostgresJobStore, engine: AsyncEngine
) -> None:
    _a, _b, cancelled, callback = await _graph(
        store,
        Step(_new("a"), name="a"),
        Step(_new("b"), name="b"),
        Step(_new("fan"), after=("a", "b")),
        Step(_new("fan", run_anyway=True), after=("a", "b")),
    )
    assert await _rows(engine) == (1, 2)
    await _run(store, "a", Decision.fail("broken"))
    assert await _seen(store, [cancelled, callback]) == [
        (Status.CANCELLED, 0),
        (Status.WAITING, 1),
    ]
    assert await _rows(engine) == (1, 2)
    await _run(store, "b", Decision.complete())
    assert await _seen(store, [callback]) == [(Status.PENDING, 0)]
    assert await _rows(engine) == (0, 2)


async def test_a_workflow_retry_counts_again_for_the_jobs_sharing_a_count(
    store: PostgresJobStore, engine: AsyncEngine
) -> None:
    a, _b, *callbacks, cancelled = await _graph(
        store,
        Step(_new("a"), name="a"),
        Step(_new("b", delay=timedelta(hours=1)), name="b"),
        *(Step(_new("callback", run_anyway=True), after=("a", "b")) for _ in range(2)),
        Step(_new("fan"), after=("a", "b")),
    )
    await _run(store, "a", Decision.fail("first try"))
    assert await _seen(store, [*callbacks, cancelled]) == [
        (Status.WAITING, 1),
        (Status.WAITING, 1),
        (Status.CANCELLED, 0),
    ]
    assert a.workflow_id is not None
    # `a` and the cancelled job run again: the callbacks, still waiting on their shared
    # count, wait for `a` again; the retried job waits on a count of its own.
    assert await store.retry_workflow(a.workflow_id) == 2
    assert await _seen(store, [*callbacks, cancelled]) == [(Status.WAITING, 2)] * 3
    assert await _rows(engine) == (2, 4)
    await _run(store, "a", Decision.complete())
    assert await _seen(store, [*callbacks, cancelled]) == [(Status.WAITING, 1)] * 3
    await store.cancel(_b.id)
    assert await _seen(store, [*callbacks, cancelled]) == [
        (Status.PENDING, 0),
        (Status.PENDING, 0),
        (Status.CANCELLED, 0),
    ]
    assert (await _rows(engine))[0] == 0
