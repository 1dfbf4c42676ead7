"""Retention: `prune_finished` deletes finished jobs old enough by the store's clock, and
nothing else.

Ages here are 50 ms; the tests wait, by polling the store's own clock, until the jobs are
older than that, so they never guess how long a database round trip takes.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobqueue.domain.errors import JobNotFound
from jobqueue.domain.job import Job
from jobqueue.domain.outcome import Decision
from jobqueue.domain.ports import JobStore
from jobqueue.domain.status import Status
from tests.contract.steps import claim_only, job_in, new_job, store_time_after
from tests.support.endings import record

AGE = timedelta(milliseconds=50)
LONG = timedelta(hours=1)
BOTH = {Status.COMPLETED: AGE, Status.FAILED: AGE}


async def older_than_age(store: JobStore, *jobs: Job) -> None:
    """Wait until every one of `jobs` finished more than `AGE` ago by the store's clock.

    Call it after making every job a test needs: it leaves due `clock-probe` jobs behind,
    which a later claim would take.
    """
    await store_time_after(store, max(job.updated_at for job in jobs) + AGE)


async def gone(store: JobStore, job: Job) -> bool:
    try:
        await store.get(job.id)
    except JobNotFound:
        return True
    return False


async def test_finished_jobs_older_than_their_age_are_deleted(store: JobStore) -> None:
    completed = await job_in(store, Status.COMPLETED)
    failed = await job_in(store, Status.FAILED)
    await older_than_age(store, completed, failed)

    assert await store.prune_finished(BOTH, 10) == 2

    assert await gone(store, completed)
    assert await gone(store, failed)
    assert await store.prune_finished(BOTH, 10) == 0


async def test_dead_letters_and_live_jobs_are_left_alone(store: JobStore) -> None:
    dead = await job_in(store, Status.DEAD_LETTER)
    processing = await job_in(store, Status.PROCESSING)
    completed = await job_in(store, Status.COMPLETED)
    # Last: a pending job is due, and making another job would claim it.
    pending = await job_in(store, Status.PENDING)
    await older_than_age(store, dead, processing, completed, pending)

    assert await store.prune_finished(BOTH, 10) == 1

    assert await gone(store, completed)
    for untouched in (dead, processing, pending):
        assert await store.get(untouched.id) == untouched


async def test_jobs_younger_than_their_age_are_kept(store: JobStore) -> None:
    completed = await job_in(store, Status.COMPLETED)
    failed = await job_in(store, Status.FAILED)

    assert await store.prune_finished({Status.COMPLETED: LONG, Status.FAILED: LONG}, 10) == 0

    assert await store.get(completed.id) == completed
    assert await store.get(failed.id) == failed


async def test_only_the_statuses_given_are_pruned(store: JobStore) -> None:
    completed = await job_in(store, Status.COMPLETED)
    failed = await job_in(store, Status.FAILED)
    await older_than_age(store, completed, failed)

    assert await store.prune_finished({Status.FAILED: AGE}, 10) == 1

    assert await gone(store, failed)
    assert await store.get(completed.id) == completed


async def test_each_status_is_judged_by_its_own_age(store: JobStore) -> None:
    completed = await job_in(store, Status.COMPLETED)
    failed = await job_in(store, Status.FAILED)
    await older_than_age(store, completed, failed)

    assert await store.prune_finished({Status.COMPLETED: LONG, Status.FAILED: AGE}, 10) == 1

    assert await gone(store, failed)
    assert await store.get(completed.id) == completed


async def test_at_most_limit_jobs_are_deleted_oldest_first(store: JobStore) -> None:
    first = await job_in(store, Status.COMPLETED)
    second = await job_in(store, Status.FAILED)
    third = await job_in(store, Status.COMPLETED)
    assert first.updated_at < second.updated_at < third.updated_at
    await older_than_age(store, first, second, third)

    assert await store.prune_finished(BOTH, 2) == 2
    assert await gone(store, first)
    assert await gone(store, second)
    assert await store.get(third.id) == third

    assert await store.prune_finished(BOTH, 2) == 1
    assert await store.prune_finished(BOTH, 2) == 0


async def test_a_pruned_jobs_idempotency_key_can_be_used_again(store: JobStore) -> None:
    first = (await store.submit(new_job(key="once"))).job
    completed = await record(store, (await claim_only(store, first)).lease, Decision.complete())
    await older_than_age(store, completed)

    assert await store.prune_finished({Status.COMPLETED: AGE}, 10) == 1
    again = await store.submit(new_job(key="once"))

    assert not again.replayed
    assert again.job.id != first.id


async def test_an_empty_policy_prunes_nothing(store: JobStore) -> None:
    completed = await job_in(store, Status.COMPLETED)
    await older_than_age(store, completed)

    assert await store.prune_finished({}, 10) == 0
    assert await store.get(completed.id) == completed


@pytest.mark.parametrize("status", [Status.DEAD_LETTER, Status.PENDING, Status.PROCESSING])
async def test_a_status_that_is_not_terminal_is_refused_before_anything_is_deleted(
    store: JobStore, status: Status
) -> None:
    completed = await job_in(store, Status.COMPLETED)
    await older_than_age(store, completed)

    with pytest.raises(ValueError, match=f"only finished jobs .* can be pruned, not {status}"):
        await store.prune_finished({Status.COMPLETED: AGE, status: AGE}, 10)

    assert await store.get(completed.id) == completed


@pytest.mark.parametrize("limit", [0, -1])
async def test_a_limit_below_one_is_refused(store: JobStore, limit: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        await store.prune_finished(BOTH, limit)


async def test_a_negative_age_is_refused(store: JobStore) -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        await store.prune_finished({Status.FAILED: -AGE}, 10)
