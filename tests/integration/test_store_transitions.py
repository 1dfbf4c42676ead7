"""The store accepts exactly the transitions of the domain's table, and refuses the rest.

Every operation runs against a job seeded directly in every status; the expectation is
derived from `jobqueue.domain.job.TRANSITIONS`, never copied from it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from uuid import UUID, uuid4

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.errors import InvalidTransition, JobNotFound, JobQueueError, LeaseLost
from jobqueue.domain.job import Job, Lease
from jobqueue.domain.outcome import Decision
from jobqueue.domain.status import Status
from jobqueue.domain.transitions import Operation, targets
from tests.fakes import TEST_TYPES
from tests.support.endings import record
from tests.support.job_rows import SEEDED_TOKEN, read_row, seed_job

MAX_ATTEMPTS = 3

LeasedCall = Callable[[PostgresJobStore, Lease], Awaitable[Job]]

# The outcome writes, each called with the lease the seeded job holds.
LEASED: dict[Operation, LeasedCall] = {
    Operation.COMPLETE: lambda store, lease: record(store, lease, Decision.complete()),
    Operation.BACKOFF: lambda store, lease: record(
        store, lease, Decision.backoff(timedelta(seconds=30), "flaky")
    ),
    Operation.FAIL: lambda store, lease: record(store, lease, Decision.fail("bad input")),
    Operation.DEAD_LETTER: lambda store, lease: record(
        store, lease, Decision.dead_letter("gave up")
    ),
    Operation.RELEASE: lambda store, lease: record(store, lease, Decision.release()),
    Operation.SNOOZE: lambda store, lease: record(
        store, lease, Decision.snooze(timedelta(seconds=30))
    ),
}


async def _seed_pair(engine: AsyncEngine, operation: Operation, source: Status) -> list[UUID]:
    """A job with attempts left and one on its last attempt (recovery's two targets).

    Processing jobs hold a valid lease, except for recovery, which only applies to an
    expired one.
    """
    lease = timedelta(seconds=-1) if operation is Operation.RECOVER else timedelta(hours=1)
    # A pending job's attempt is counted when it is claimed, so it is one behind.
    behind = 1 if source is Status.PENDING else 0
    return [
        await seed_job(
            engine,
            source,
            attempts=attempts - behind,
            max_attempts=MAX_ATTEMPTS,
            lease=lease,
        )
        for attempts in (1, MAX_ATTEMPTS)
    ]


# Written by the database for a graph, not by a store call on the job itself: the
# ending of the job it waits for, and its workflow's retry.
_GRAPH = (Operation.DEPENDENCIES_MET, Operation.DEPENDENCY_FAILED, Operation.RETRY_WORKFLOW)
_BLOCKER = "blocker"


async def _graph_pair(engine: AsyncEngine, operation: Operation, job_ids: list[UUID]) -> None:
    """The pair as a graph can meet them: waiting jobs wait for a pending blocker; in a
    workflow, the second depends on the first (a retry makes it wait for it again)."""
    async with engine.begin() as connection:
        if operation is Operation.RETRY_WORKFLOW:
            await connection.execute(
                text(
                    "UPDATE jobs SET workflow_id = :workflow, has_dependents = id = :first,"
                    " depends_on = CASE WHEN id = :second THEN ARRAY[CAST(:first AS uuid)] END"
                    " WHERE id IN (:first, :second)"
                ),
                {"workflow": uuid4(), "first": job_ids[0], "second": job_ids[1]},
            )
            return
    blocker = await seed_job(engine, Status.PENDING, attempts=0, job_type=_BLOCKER)
    async with engine.begin() as connection:
        await connection.execute(
            text("UPDATE jobs SET has_dependents = true WHERE id = :id"), {"id": blocker}
        )
        for job_id in job_ids:
            await connection.execute(
                text(
                    "UPDATE jobs SET waiting_for = 1, depends_on = ARRAY[CAST(:blocker AS uuid)]"
                    " WHERE id = :id AND status = 'waiting'"
                ),
                {"id": job_id, "blocker": blocker},
            )
            await connection.execute(
                text(
                    "INSERT INTO job_dependencies (depends_on, job_id)"
                    " SELECT :blocker, id FROM jobs WHERE id = :id AND status = 'waiting'"
                ),
                {"id": job_id, "blocker": blocker},
            )
            # Its count, as a graph's insert writes it (migration 0025).
            await connection.execute(
                text(
                    "INSERT INTO job_waits (job_id, remaining)"
                    " SELECT id, 1 FROM jobs WHERE id = :id AND status = 'waiting'"
                ),
                {"id": job_id},
            )


async def _apply_graph(
    store: PostgresJobStore, operation: Operation, job_ids: list[UUID]
) -> dict[UUID, Job | JobQueueError | None]:
    """The graph's writes; a job they did not move is passed over (None)."""
    before = {job_id: await store.get(job_id) for job_id in job_ids}
    if operation is Operation.RETRY_WORKFLOW:
        workflow = before[job_ids[0]].workflow_id
        assert workflow is not None
        await store.retry_workflow(workflow)
    else:
        (blocker,) = await store.claim(1, timedelta(minutes=5), types=[_BLOCKER])
        met = operation is Operation.DEPENDENCIES_MET
        await record(store, blocker.lease, Decision.complete() if met else Decision.fail("no"))
    after = {job_id: await store.get(job_id) for job_id in job_ids}
    return {i: None if after[i] == before[i] else after[i] for i in job_ids}


async def _apply(
    store: PostgresJobStore, operation: Operation, job_ids: list[UUID]
) -> dict[UUID, Job | JobQueueError | None]:
    """What the operation did to each job: the job it wrote, the error refusing it, or
    None when a batch operation (claim, recovery, a graph's) passed it over."""
    if operation in _GRAPH:
        return await _apply_graph(store, operation, job_ids)
    if operation is Operation.CLAIM:
        picked = {
            job.id: job for job in await store.claim(10, timedelta(minutes=5), types=TEST_TYPES)
        }
        return {job_id: picked.get(job_id) for job_id in job_ids}
    if operation is Operation.RECOVER:
        picked = {job.id: job for job in await store.recover_expired(10)}
        return {job_id: picked.get(job_id) for job_id in job_ids}
    outcomes: dict[UUID, Job | JobQueueError | None] = {}
    for job_id in job_ids:
        try:
            if operation is Operation.RETRY:
                outcomes[job_id] = await store.retry(job_id)
            elif operation is Operation.CANCEL:
                outcomes[job_id] = await store.cancel(job_id)
            elif operation is Operation.RESCHEDULE:
                outcomes[job_id] = await store.reschedule(job_id, delay=timedelta(minutes=5))
            else:
                outcomes[job_id] = await LEASED[operation](store, Lease(job_id, SEEDED_TOKEN))
        except JobQueueError as error:
            outcomes[job_id] = error
    return outcomes


def _is_expected_refusal(operation: Operation, source: Status, outcome: object) -> bool:
    if operation in (Operation.CLAIM, Operation.RECOVER, *_GRAPH):
        return outcome is None
    if operation in (Operation.RETRY, Operation.CANCEL, Operation.RESCHEDULE):
        return isinstance(outcome, InvalidTransition) and outcome.status == source
    return isinstance(outcome, LeaseLost)


@pytest.mark.parametrize("source", list(Status))
@pytest.mark.parametrize("operation", list(Operation))
async def test_store_accepts_exactly_the_domain_transitions(
    engine: AsyncEngine, operation: Operation, source: Status
) -> None:
    store = PostgresJobStore(engine)
    job_ids = await _seed_pair(engine, operation, source)
    if operation in _GRAPH:
        await _graph_pair(engine, operation, job_ids)
    before = {job_id: await read_row(engine, job_id) for job_id in job_ids}

    outcomes = await _apply(store, operation, job_ids)

    allowed = targets(operation, source)
    reached: set[Status] = set()
    for job_id, outcome in outcomes.items():
        if isinstance(outcome, Job):
            assert outcome.status in allowed, f"{operation} moved {source} to {outcome.status}"
            assert await store.get(job_id) == outcome
            reached.add(outcome.status)
        else:
            assert _is_expected_refusal(operation, source, outcome), outcome
            assert await read_row(engine, job_id) == before[job_id], "a refusal wrote"
    assert reached == allowed


@pytest.mark.parametrize("operation", sorted(LEASED))
async def test_outcome_write_for_a_missing_job_is_a_lost_lease(
    engine: AsyncEngine, operation: Operation
) -> None:
    missing = Lease(uuid4(), 1)
    with pytest.raises(LeaseLost) as raised:
        await LEASED[operation](PostgresJobStore(engine), missing)
    assert (raised.value.job_id, raised.value.lease_token) == (missing.job_id, 1)


async def test_operator_retry_of_a_missing_job_is_not_found(engine: AsyncEngine) -> None:
    missing = uuid4()
    with pytest.raises(JobNotFound) as raised:
        await PostgresJobStore(engine).retry(missing)
    assert raised.value.job_id == missing
