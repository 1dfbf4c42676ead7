"""Queues and priorities: a claim takes only its queue's jobs, the most urgent first."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from jobqueue.domain.job import Job
from jobqueue.domain.ports import JobStore
from jobqueue.domain.status import Status
from tests.contract.steps import LEASE, new_job
from tests.fakes import TEST_TYPES


async def test_a_claim_takes_only_the_jobs_of_its_queue(store: JobStore) -> None:
    emails = (await store.submit(replace(new_job(), queue="emails"))).job
    default = (await store.submit(new_job())).job

    assert [job.id for job in await store.claim(10, LEASE, "emails", types=TEST_TYPES)] == [
        emails.id
    ]
    assert [job.id for job in await store.claim(10, LEASE, types=TEST_TYPES)] == [default.id]
    assert await store.claim(10, LEASE, "nobody-uses-this", types=TEST_TYPES) == []
    assert (await store.get(emails.id)).queue == "emails"


async def test_under_a_backlog_claims_go_by_priority_then_due_time(store: JobStore) -> None:
    submitted = []
    for n, priority in enumerate([7, 0, 3, 0, 9, 3, 7, 0]):
        job = (await store.submit(replace(new_job({"n": n}), priority=priority))).job
        submitted.append(job)

    order: list[Job] = []
    while batch := await store.claim(3, LEASE, types=TEST_TYPES):
        order.extend(batch)

    assert [job.priority for job in order] == [0, 0, 0, 3, 3, 7, 7, 9]
    # Within a priority, in the order they became due.
    for priority in (0, 3, 7):
        runs = [job.run_at for job in order if job.priority == priority]
        assert runs == sorted(runs)
    assert {job.id for job in order} == {job.id for job in submitted}
    assert all(job.status is Status.PROCESSING for job in order)


async def test_an_urgent_job_not_yet_due_waits_behind_due_ones(store: JobStore) -> None:
    later = (await store.submit(replace(new_job(), priority=0, delay=timedelta(hours=1)))).job
    due = (await store.submit(replace(new_job(), priority=9))).job

    assert [job.id for job in await store.claim(10, LEASE, types=TEST_TYPES)] == [due.id]
    assert (await store.get(later.id)).status is Status.PENDING
