"""Scheduled submissions: a job given `run_at` or `delay` is never claimed before it."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from jobqueue.domain.job import Job
from jobqueue.domain.ports import JobStore
from jobqueue.domain.status import Status
from tests.contract.steps import LEASE, eventually, new_job, store_time_after
from tests.fakes import TEST_TYPES


async def test_a_delay_counts_from_the_store_clock(store: JobStore) -> None:
    delay = timedelta(minutes=5)
    job = (await store.submit(replace(new_job(), delay=delay))).job

    assert job.status is Status.PENDING
    assert job.run_at == job.created_at + delay
    assert await store.get(job.id) == job


async def test_run_at_is_stored_as_given(store: JobStore) -> None:
    probe = (await store.submit(new_job())).job
    at = probe.created_at + timedelta(hours=2, microseconds=7)

    job = (await store.submit(replace(new_job(), run_at=at))).job

    assert job.run_at == at
    assert (await store.get(job.id)).run_at == at


async def test_a_scheduled_job_is_claimed_only_once_due(store: JobStore) -> None:
    scheduled = (await store.submit(replace(new_job(), delay=timedelta(milliseconds=300)))).job
    due = (await store.submit(new_job())).job

    assert [job.id for job in await store.claim(10, LEASE, types=TEST_TYPES)] == [due.id]

    async def claim_it() -> list[Job]:
        return [
            job for job in await store.claim(10, LEASE, types=TEST_TYPES) if job.id == scheduled.id
        ]

    [claimed] = await eventually(claim_it, "the scheduled job to be claimable")
    # The claim ran at or after its due time, by the store's clock.
    assert claimed.updated_at >= scheduled.run_at
    assert claimed.attempts == 1


async def test_a_run_at_in_the_past_is_due_at_once(store: JobStore) -> None:
    now = await store_time_after(store, (await store.submit(new_job())).job.created_at)
    job = (await store.submit(replace(new_job(), run_at=now - timedelta(days=1)))).job

    claimed = await store.claim(10, LEASE, types=TEST_TYPES)

    assert job.id in {each.id for each in claimed}


async def test_far_scheduled_jobs_are_not_claimed(store: JobStore) -> None:
    for days in (1, 30, 3650):
        await store.submit(replace(new_job(), delay=timedelta(days=days)))

    assert await store.claim(10, LEASE, types=TEST_TYPES) == []
