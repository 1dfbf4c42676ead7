"""The in-memory store behaves like the real one: the pool's unit tests rely on it."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from jobqueue.domain.dependencies import Step
from jobqueue.domain.errors import (
    IdempotencyConflict,
    InvalidTransition,
    JobNotFound,
    LeaseLost,
    StoreUnavailable,
)
from jobqueue.domain.fields import JsonValue
from jobqueue.domain.job import Job, Lease, NewJob
from jobqueue.domain.outcome import LEASE_EXPIRED_ERROR, Decision
from jobqueue.domain.status import Status
from jobqueue.domain.transitions import TRANSITIONS, Operation
from tests.contract.steps import BLOCKER
from tests.fakes import TEST_TYPES, InMemoryJobStore, ManualClock
from tests.support.endings import record

LEASE = timedelta(seconds=30)


def new_job(
    type: str = "email", max_attempts: int = 3, key: str | None = None, **payload: JsonValue
) -> NewJob:
    return NewJob(type=type, max_attempts=max_attempts, payload=dict(payload), idempotency_key=key)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(clock: ManualClock) -> InMemoryJobStore:
    return InMemoryJobStore(clock)


async def claim_one(store: InMemoryJobStore) -> Job:
    (job,) = await store.claim(1, LEASE, types=TEST_TYPES)
    return job


async def test_submitted_job_is_pending_and_due_now(
    store: InMemoryJobStore, clock: ManualClock
) -> None:
    submitted = await store.submit(new_job(to="a@example.com"))

    job = submitted.job
    assert not submitted.replayed
    assert (job.status, job.attempts, job.lease_token, job.locked_until) == (
        Status.PENDING,
        0,
        0,
        None,
    )
    assert job.run_at == clock()
    assert await store.get(job.id) == job


async def test_same_idempotency_key_and_request_replays_the_first_job(
    store: InMemoryJobStore,
) -> None:
    first = await store.submit(new_job(key="k1", n=1))
    # jsonb compares numbers by value and objects without key order.
    again = await store.submit(new_job(key="k1", n=1.0))

    assert again.replayed
    assert again.job.id == first.job.id
    assert len(store.jobs()) == 1


@pytest.mark.parametrize(
    "different",
    [
        new_job(key="k1", n=2),
        new_job(key="k1", n=True),
        new_job(type="sms", key="k1", n=1),
        new_job(max_attempts=5, key="k1", n=1),
    ],
)
async def test_same_idempotency_key_with_another_request_conflicts(
    store: InMemoryJobStore, different: NewJob
) -> None:
    await store.submit(new_job(key="k1", n=1))

    with pytest.raises(IdempotencyConflict):
        await store.submit(different)


async def test_get_unknown_job_raises_not_found(store: InMemoryJobStore) -> None:
    with pytest.raises(JobNotFound):
        await store.get(uuid.uuid4())


async def test_claim_takes_due_jobs_in_due_order_up_to_the_limit(
    store: InMemoryJobStore, clock: ManualClock
) -> None:
    ids = []
    for n in range(3):
        ids.append((await store.submit(new_job(n=n))).job.id)
        clock.advance(timedelta(seconds=1))

    claimed = await store.claim(2, LEASE, types=TEST_TYPES)

    assert [job.id for job in claimed] == ids[:2]
    for job in claimed:
        assert job.status is Status.PROCESSING
        assert job.attempts == 1
        assert job.lease_token == 1
        assert job.locked_until == clock() + LEASE
    assert (await store.get(ids[2])).status is Status.PENDING


async def test_claim_skips_jobs_already_claimed(store: InMemoryJobStore) -> None:
    await store.submit(new_job())
    await claim_one(store)

    assert await store.claim(5, LEASE, types=TEST_TYPES) == []


async def test_complete_with_the_current_lease_finishes_the_job(store: InMemoryJobStore) -> None:
    await store.submit(new_job())
    job = await claim_one(store)

    done = await record(store, job.lease, Decision.complete())

    assert (done.status, done.locked_until) == (Status.COMPLETED, None)


async def test_outcome_write_with_a_superseded_lease_is_refused(
    store: InMemoryJobStore, clock: ManualClock
) -> None:
    await store.submit(new_job())
    stale = await claim_one(store)
    clock.advance(LEASE + timedelta(seconds=1))
    await store.recover_expired(10)
    fresh = await claim_one(store)

    with pytest.raises(LeaseLost):
        await record(store, stale.lease, Decision.complete())
    assert fresh.lease_token == stale.lease_token + 1
    assert (await store.get(fresh.id)).status is Status.PROCESSING


async def test_outcome_write_for_an_unknown_job_is_lease_lost(store: InMemoryJobStore) -> None:
    with pytest.raises(LeaseLost):
        await record(store, Lease(uuid.uuid4(), 1), Decision.fail("boom"))


async def test_retry_makes_the_job_due_after_the_delay(
    store: InMemoryJobStore, clock: ManualClock
) -> None:
    await store.submit(new_job())
    job = await claim_one(store)

    retried = await record(
        store, job.lease, Decision.backoff(timedelta(seconds=10), "ValueError: x")
    )

    assert (retried.status, retried.last_error) == (Status.PENDING, "ValueError: x")
    assert retried.attempts == 1
    assert await store.claim(1, LEASE, types=TEST_TYPES) == []
    clock.advance(timedelta(seconds=10))
    assert [j.attempts for j in await store.claim(1, LEASE, types=TEST_TYPES)] == [2]


async def test_release_gives_the_attempt_back(store: InMemoryJobStore) -> None:
    await store.submit(new_job())
    job = await claim_one(store)

    released = await record(store, job.lease, Decision.release())

    assert (released.status, released.attempts) == (Status.PENDING, 0)
    again = await claim_one(store)
    assert (again.attempts, again.lease_token) == (1, 2)


async def test_fail_and_dead_letter_keep_the_error(store: InMemoryJobStore) -> None:
    await store.submit(new_job())
    await store.submit(new_job())
    first, second = await store.claim(2, LEASE, types=TEST_TYPES)

    failed = await record(store, first.lease, Decision.fail("Permanent: no"))
    dead = await record(store, second.lease, Decision.dead_letter("ValueError: again"))

    assert (failed.status, failed.last_error) == (Status.FAILED, "Permanent: no")
    assert (dead.status, dead.last_error) == (Status.DEAD_LETTER, "ValueError: again")


async def test_operator_retry_gives_a_dead_letter_a_fresh_budget(store: InMemoryJobStore) -> None:
    await store.submit(new_job(max_attempts=1))
    job = await claim_one(store)
    await record(store, job.lease, Decision.dead_letter("boom"))

    revived = await store.retry(job.id)

    assert (revived.status, revived.attempts) == (Status.PENDING, 0)
    assert (await claim_one(store)).attempts == 1


async def test_operator_retry_refuses_unknown_and_live_jobs(store: InMemoryJobStore) -> None:
    pending = (await store.submit(new_job())).job

    with pytest.raises(JobNotFound):
        await store.retry(uuid.uuid4())
    with pytest.raises(InvalidTransition) as refused:
        await store.retry(pending.id)
    assert refused.value.status == Status.PENDING


async def test_recovery_requeues_expired_leases_and_dead_letters_the_last_attempt(
    store: InMemoryJobStore, clock: ManualClock
) -> None:
    await store.submit(new_job(max_attempts=2))
    await store.submit(new_job(max_attempts=1))
    first, last = await store.claim(2, LEASE, types=TEST_TYPES)

    assert await store.recover_expired(10) == []
    clock.advance(LEASE + timedelta(microseconds=1))
    recovered = {job.id: job for job in await store.recover_expired(10)}

    assert recovered[first.id].status is Status.PENDING
    assert recovered[first.id].attempts == 1  # a lost attempt counts
    assert recovered[last.id].status is Status.DEAD_LETTER
    assert recovered[last.id].last_error == LEASE_EXPIRED_ERROR


async def test_recovery_takes_at_most_the_limit(
    store: InMemoryJobStore, clock: ManualClock
) -> None:
    for _ in range(3):
        await store.submit(new_job())
    await store.claim(3, LEASE, types=TEST_TYPES)
    clock.advance(LEASE * 2)

    assert len(await store.recover_expired(2)) == 2
    assert len(await store.recover_expired(2)) == 1


async def test_switched_off_store_raises_unavailable(store: InMemoryJobStore) -> None:
    store.available = False

    with pytest.raises(StoreUnavailable):
        await store.ping()
    with pytest.raises(StoreUnavailable):
        await store.claim(1, LEASE, types=TEST_TYPES)


async def _job_in(store: InMemoryJobStore, status: Status) -> Job:
    # In a workflow, so that retrying its workflow is an operation it can meet.
    if status is Status.WAITING:
        blocker = Step(new_job(type=BLOCKER), name="blocker")
        _, waiting = await store.submit_graph([blocker, Step(new_job(), after=("blocker",))])
        return waiting.job
    await store.submit_graph([Step(new_job(max_attempts=1))])
    if status is Status.PENDING:
        return store.jobs()[-1]
    job = await claim_one(store)
    match status:
        case Status.COMPLETED:
            return await record(store, job.lease, Decision.complete())
        case Status.FAILED:
            return await record(store, job.lease, Decision.fail("x"))
        case Status.DEAD_LETTER:
            return await record(store, job.lease, Decision.dead_letter("x"))
        case Status.CANCELLED:
            return await store.cancel(job.id)
    return job


async def _attempt(
    store: InMemoryJobStore, clock: ManualClock, operation: Operation, job: Job
) -> None:
    lease = Lease(job.id, job.lease_token)
    match operation:
        case Operation.CLAIM:
            if not await store.claim(1, LEASE, types=TEST_TYPES):
                raise InvalidTransition(job.id, operation, job.status)
        case Operation.COMPLETE:
            await record(store, lease, Decision.complete())
        case Operation.BACKOFF:
            await record(store, lease, Decision.backoff(timedelta(0), "x"))
        case Operation.FAIL:
            await record(store, lease, Decision.fail("x"))
        case Operation.DEAD_LETTER:
            await record(store, lease, Decision.dead_letter("x"))
        case Operation.RELEASE:
            await record(store, lease, Decision.release())
        case Operation.SNOOZE:
            await record(store, lease, Decision.snooze(timedelta(0)))
        case Operation.RETRY:
            await store.retry(job.id)
        case Operation.CANCEL:
            await store.cancel(job.id)
        case Operation.RESCHEDULE:
            await store.reschedule(job.id, delay=timedelta(minutes=5))
        case Operation.RECOVER:
            clock.advance(LEASE * 2)
            if not await store.recover_expired(1):
                raise InvalidTransition(job.id, operation, job.status)
        case Operation.DEPENDENCIES_MET | Operation.DEPENDENCY_FAILED:
            # What the ending of the job it waits for does; a job waiting for none is not
            # moved by any.
            if not job.depends_on:
                raise InvalidTransition(job.id, operation, job.status)
            (blocker,) = await store.claim(1, LEASE, types=[BLOCKER])
            met = operation is Operation.DEPENDENCIES_MET
            await record(store, blocker.lease, Decision.complete() if met else Decision.fail("x"))
        case Operation.RETRY_WORKFLOW:
            assert job.workflow_id is not None
            if not await store.retry_workflow(job.workflow_id):
                raise InvalidTransition(job.id, operation, job.status)


@pytest.mark.parametrize("status", list(Status))
@pytest.mark.parametrize("operation", list(Operation))
async def test_store_accepts_exactly_the_transitions_of_the_domain_table(
    status: Status, operation: Operation
) -> None:
    clock = ManualClock()
    store = InMemoryJobStore(clock)
    job = await _job_in(store, status)
    allowed = {t.target for t in TRANSITIONS if t.operation is operation and t.source is status}

    try:
        await _attempt(store, clock, operation, job)
    except (InvalidTransition, LeaseLost):
        assert not allowed
    else:
        assert (await store.get(job.id)).status in allowed


@pytest.mark.parametrize("limit", [0, -1])
async def test_claim_and_recovery_refuse_limits_below_one(
    store: InMemoryJobStore, limit: int
) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        await store.claim(limit, LEASE, types=TEST_TYPES)
    with pytest.raises(ValueError, match="at least 1"):
        await store.recover_expired(limit)


@pytest.mark.parametrize("alone", [True, False], ids=["retried alone", "workflow retried"])
async def test_a_retried_dependency_is_waited_for_again_once_as_in_postgresql(
    store: InMemoryJobStore, alone: bool
) -> None:
    # As test_dependencies_postgres's tests of a dependency retried alone and of a
    # waiting callback in a workflow retried: the callback counted the first ending, and
    # waits for the retry's, counted back on once (a workflow's retry counts it itself;
    # reviving `first` must not count it again).
    first, _later, callback = await store.submit_graph(
        [
            Step(NewJob.build(type="first", max_attempts=1), name="first"),
            Step(NewJob.build(type="later", delay=timedelta(hours=1)), name="later"),
            Step(NewJob.build(type="callback", run_anyway=True), after=("first", "later")),
        ]
    )
    [claimed] = await store.claim(1, timedelta(minutes=1), types=["first"])
    await record(store, claimed.lease, Decision.fail("first try"))
    assert (await store.get(callback.job.id)).waiting_for == 1
    if alone:
        await store.retry(first.job.id)
    else:
        assert first.job.workflow_id is not None
        assert await store.retry_workflow(first.job.workflow_id) == 1
    assert (await store.get(callback.job.id)).waiting_for == 2
    [claimed] = await store.claim(1, timedelta(minutes=1), types=["first"])
    await record(store, claimed.lease, Decision.complete())
    waiting = await store.get(callback.job.id)
    assert (waiting.status, waiting.waiting_for) == (Status.WAITING, 1)
