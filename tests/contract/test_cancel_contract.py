"""Cancelling jobs: one write ends a pending or running job for good, fences out the
running attempt, and keeps the attempt it stopped in the job's history."""

from __future__ import annotations

from dataclasses import replace
from uuid import uuid4

import pytest

from jobqueue.domain.bulk import Selection
from jobqueue.domain.errors import InvalidTransition, JobNotFound, LeaseLost
from jobqueue.domain.job import Job
from jobqueue.domain.outcome import Decision
from jobqueue.domain.ports import JobStore
from jobqueue.domain.status import Status
from jobqueue.domain.transitions import Operation
from tests.contract.steps import LEASE, claim_only, job_in, new_job, submit
from tests.fakes import TEST_TYPES
from tests.support.endings import record


async def test_a_cancelled_pending_job_is_never_claimed(store: JobStore) -> None:
    job = await submit(store)

    cancelled = await store.cancel(job.id)

    assert cancelled.status is Status.CANCELLED
    assert (cancelled.attempts, cancelled.locked_until, cancelled.run_at) == (0, None, job.run_at)
    assert cancelled.finished_at == cancelled.updated_at
    assert cancelled.history == ()
    assert await store.claim(10, LEASE, types=TEST_TYPES) == []
    assert await store.get(job.id) == cancelled


async def test_cancelling_a_running_job_fences_out_its_attempt(store: JobStore) -> None:
    claimed = await job_in(store, Status.PROCESSING)

    cancelled = await store.cancel(claimed.id)

    assert cancelled.status is Status.CANCELLED
    assert cancelled.locked_until is None
    # The handler's late return, and a renewal, find no lease: nothing is written over it.
    with pytest.raises(LeaseLost):
        await record(store, claimed.lease, Decision.complete())
    assert await store.renew([claimed.lease], LEASE) == set()
    assert await store.get(claimed.id) == cancelled
    # The attempt it stopped is kept, ended as cancelled, by the process that ran it.
    (stopped,) = cancelled.history
    assert (stopped.attempt, stopped.outcome, stopped.error) == (1, "cancelled", None)
    assert stopped.started_at == claimed.started_at
    assert stopped.finished_at == cancelled.updated_at
    assert stopped.worker == claimed.worker


async def test_a_cancelled_job_can_be_retried_and_keeps_its_history(store: JobStore) -> None:
    claimed = await job_in(store, Status.PROCESSING)
    await store.cancel(claimed.id)

    retried = await store.retry(claimed.id)

    assert (retried.status, retried.attempts) == (Status.PENDING, 0)
    again = await claim_only(store, retried)
    done = await record(store, again.lease, Decision.complete())
    assert [(a.attempt, a.outcome) for a in done.history] == [(1, "cancelled"), (1, "completed")]


@pytest.mark.parametrize(
    "status", [Status.COMPLETED, Status.FAILED, Status.DEAD_LETTER, Status.CANCELLED]
)
async def test_a_job_that_ended_cannot_be_cancelled(store: JobStore, status: Status) -> None:
    job = await job_in(store, status)

    with pytest.raises(InvalidTransition) as refused:
        await store.cancel(job.id)

    assert (refused.value.operation, refused.value.status) == (Operation.CANCEL, status)
    assert await store.get(job.id) == job


async def test_cancelling_an_unknown_job_is_not_found(store: JobStore) -> None:
    with pytest.raises(JobNotFound):
        await store.cancel(uuid4())


async def _pending(store: JobStore, queue: str, job_type: str = "email") -> Job:
    return (await store.submit(replace(new_job(job_type=job_type), queue=queue))).job


async def test_cancel_many_takes_the_first_matching_jobs_in_claim_order(store: JobStore) -> None:
    urgent = (await store.submit(replace(new_job(), queue="mail", priority=0))).job
    later = [await _pending(store, "mail") for _ in range(2)]
    other_queue = await _pending(store, "other")
    other_type = await _pending(store, "mail", job_type="sms")

    count = await store.cancel_many(
        Selection(Status.PENDING, queue="mail", type="email", limit=2, operation=Operation.CANCEL)
    )

    assert count == 2
    statuses = {job.id: (await store.get(job.id)).status for job in [urgent, *later]}
    assert statuses == {
        urgent.id: Status.CANCELLED,
        later[0].id: Status.CANCELLED,
        later[1].id: Status.PENDING,
    }
    assert (await store.get(other_queue.id)).status is Status.PENDING
    assert (await store.get(other_type.id)).status is Status.PENDING


async def test_cancel_many_of_running_jobs_fences_each_attempt(store: JobStore) -> None:
    for _ in range(3):
        await submit(store)
    running = await store.claim(3, LEASE, types=TEST_TYPES)

    count = await store.cancel_many(Selection(Status.PROCESSING, operation=Operation.CANCEL))

    assert count == 3
    assert await store.record_many([(job.lease, Decision.complete()) for job in running]) == set()
    for job in running:
        cancelled = await store.get(job.id)
        assert cancelled.status is Status.CANCELLED
        assert [a.outcome for a in cancelled.history] == ["cancelled"]


def test_a_cancel_selection_takes_only_jobs_that_have_not_finished() -> None:
    with pytest.raises(ValueError, match="status must be pending or processing or waiting"):
        Selection(Status.COMPLETED, operation=Operation.CANCEL)
    with pytest.raises(ValueError, match="status must be cancelled or dead_letter or failed"):
        Selection(Status.PENDING)


async def test_a_selection_is_used_only_for_what_it_was_made(store: JobStore) -> None:
    with pytest.raises(ValueError, match="cannot be used"):
        await store.retry_many(Selection(Status.PENDING, operation=Operation.CANCEL))
    with pytest.raises(ValueError, match="cannot be used"):
        await store.cancel_many(Selection(Status.FAILED))
