"""Snoozing: a handler's "not yet" sends the job back to pending for a while, gives the
attempt back, and is counted; an operator's retry starts the count again."""

from __future__ import annotations

from datetime import timedelta

from jobqueue.domain.outcome import Decision
from jobqueue.domain.ports import JobStore
from jobqueue.domain.status import Status
from tests.contract.steps import LEASE, claim_only, job_in, submit
from tests.fakes import TEST_TYPES
from tests.support.endings import record

SNOOZE = timedelta(minutes=10)


async def test_a_snooze_keeps_the_attempts_and_counts_the_snooze(store: JobStore) -> None:
    claimed = await job_in(store, Status.PROCESSING)
    assert (claimed.attempts, claimed.snoozes) == (1, 0)

    snoozed = await record(store, claimed.lease, Decision.snooze(SNOOZE))

    assert (snoozed.status, snoozed.attempts, snoozed.snoozes) == (Status.PENDING, 0, 1)
    assert snoozed.run_at == snoozed.updated_at + SNOOZE
    assert snoozed.locked_until is None
    # Given back, like a release: not an attempt of the job's history.
    assert snoozed.history == ()
    assert await store.claim(10, LEASE, types=TEST_TYPES) == []


async def test_a_job_due_again_after_a_snooze_counts_its_next_attempt_as_its_first(
    store: JobStore,
) -> None:
    job = await submit(store)
    first = await claim_only(store, job)
    await record(store, first.lease, Decision.snooze(timedelta(0)))

    again = await claim_only(store, job)
    snoozed_again = await record(store, again.lease, Decision.snooze(timedelta(0)))

    assert (again.attempts, again.snoozes) == (1, 1)
    assert (snoozed_again.attempts, snoozed_again.snoozes) == (0, 2)


async def test_an_operators_retry_starts_the_snooze_count_again(store: JobStore) -> None:
    job = await submit(store)
    claimed = await claim_only(store, job)
    snoozed = await record(store, claimed.lease, Decision.snooze(timedelta(0)))
    again = await claim_only(store, snoozed)
    await record(store, again.lease, Decision.dead_letter("gave up"))

    retried = await store.retry(job.id)

    assert (retried.attempts, retried.snoozes) == (0, 0)
