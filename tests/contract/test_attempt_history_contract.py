"""Attempt history: every attempt's ending is kept with the job, the last 20, through
retries, dead-lettering, an operator's retry and lease recovery."""

from __future__ import annotations

import itertools
from datetime import timedelta

from jobqueue.domain.attempts import MAX_KEPT_ATTEMPTS, Outcome
from jobqueue.domain.job import Job
from jobqueue.domain.outcome import LEASE_EXPIRED_ERROR, Decision
from jobqueue.domain.ports import JobStore
from jobqueue.domain.status import Status
from tests.contract.steps import LEASE, SHORT_LEASE, claim_only, eventually, submit
from tests.support.endings import record

NOW = timedelta(0)


async def _attempt(store: JobStore, job: Job, decision: Decision) -> Job:
    claimed = await claim_only(store, job)
    return await record(store, claimed.lease, decision)


async def test_retried_three_times_dead_lettered_then_retried_by_hand_keeps_every_attempt(
    store: JobStore,
) -> None:
    job = await submit(store, max_attempts=4)
    for n in range(1, 4):
        job = await _attempt(store, job, Decision.backoff(NOW, f"error {n}"))
    job = await _attempt(store, job, Decision.dead_letter("error 4"))
    assert job.status is Status.DEAD_LETTER
    job = await store.retry(job.id)
    running = await claim_only(store, job)
    assert [(a.attempt, a.outcome) for a in running.history][-1] == (1, Outcome.RUNNING)
    assert running.history[-1].finished_at is None
    done = await record(store, running.lease, Decision.complete())

    history = (await store.get(job.id)).history

    assert [(a.attempt, a.outcome, a.error) for a in history] == [
        (1, "retried", "error 1"),
        (2, "retried", "error 2"),
        (3, "retried", "error 3"),
        (4, "dead_letter", "error 4"),
        (1, "completed", None),
    ]
    for attempt in history:
        assert attempt.started_at is not None
        assert attempt.finished_at is not None
        assert attempt.started_at <= attempt.finished_at
        assert attempt.worker
    # Each began after the one before it ended, and the last ended with the job.
    for before, after in itertools.pairwise(history):
        assert before.finished_at is not None
        assert after.started_at is not None
        assert before.finished_at <= after.started_at
    assert history[-1].finished_at == done.finished_at == done.updated_at


async def test_a_job_run_once_shows_its_one_attempt_and_a_new_job_none(store: JobStore) -> None:
    job = await submit(store)
    assert job.history == ()
    assert job.finished_at is None

    done = await _attempt(store, job, Decision.complete())

    (only,) = done.history
    assert (only.attempt, only.outcome, only.error) == (1, "completed", None)
    assert done.attempt_log == ()


async def test_a_given_back_attempt_is_not_kept(store: JobStore) -> None:
    job = await submit(store)
    job = await _attempt(store, job, Decision.release())
    assert job.history == ()

    job = await _attempt(store, job, Decision.fail("bad input"))
    assert [(a.attempt, a.outcome) for a in job.history] == [(1, "failed")]


async def test_a_recovered_lease_is_kept_as_lease_expired(store: JobStore) -> None:
    job = await submit(store, max_attempts=2)
    await claim_only(store, job, lease=SHORT_LEASE)
    await eventually(lambda: store.recover_expired(10), "an expired lease")
    again = await claim_only(store, await store.get(job.id), lease=SHORT_LEASE)
    await eventually(lambda: store.recover_expired(10), "the last lease expired")

    dead = await store.get(again.id)

    assert dead.status is Status.DEAD_LETTER
    assert [(a.attempt, a.outcome, a.error) for a in dead.history] == [
        (1, Outcome.LEASE_EXPIRED, LEASE_EXPIRED_ERROR),
        (2, "dead_letter", LEASE_EXPIRED_ERROR),
    ]


async def test_only_the_last_attempts_are_kept(store: JobStore) -> None:
    total = MAX_KEPT_ATTEMPTS + 5
    job = await submit(store, max_attempts=total + 1)
    for n in range(1, total):
        job = await _attempt(store, job, Decision.backoff(NOW, f"error {n}"))
    job = await _attempt(store, job, Decision.complete())

    history = job.history

    assert len(history) == MAX_KEPT_ATTEMPTS
    assert [a.attempt for a in history] == list(range(total - MAX_KEPT_ATTEMPTS + 1, total + 1))
    assert history[-1].outcome == "completed"


async def test_the_claim_says_when_and_where_the_attempt_began(store: JobStore) -> None:
    job = await submit(store)
    claimed = await claim_only(store, job, lease=LEASE)

    assert claimed.started_at == claimed.updated_at
    assert claimed.worker
    assert claimed.locked_until is not None
