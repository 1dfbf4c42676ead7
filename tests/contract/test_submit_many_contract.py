"""Submitting many jobs at once: all or none, each answered as `submit` answers it."""

from __future__ import annotations

import pytest

from jobqueue.domain.errors import IdempotencyConflict
from jobqueue.domain.job import NewJob
from jobqueue.domain.listing import JobQuery
from jobqueue.domain.ports import JobStore
from jobqueue.domain.status import Status
from jobqueue.domain.unique import Unique
from tests.contract.steps import new_job


async def _pending(store: JobStore) -> list[object]:
    page = await store.list_jobs(JobQuery(status=Status.PENDING, limit=500))
    return [job.payload for job in page.jobs]


async def test_every_job_is_stored_and_answered_in_the_order_given(store: JobStore) -> None:
    news = [new_job({"n": n}) for n in range(5)]

    submitted = await store.submit_many(news)

    assert [each.job.payload for each in submitted] == [{"n": n} for n in range(5)]
    assert not any(each.replayed or each.duplicate for each in submitted)
    for each in submitted:
        assert await store.get(each.job.id) == each.job
    assert len(await _pending(store)) == 5


async def test_keys_taken_before_or_within_the_call_are_replays_and_duplicates(
    store: JobStore,
) -> None:
    first = (await store.submit(new_job({"n": 0}, key="k-0"))).job
    unique = Unique(key="report-1")
    news = [
        new_job({"n": 0}, key="k-0"),  # replays the job stored before
        new_job({"n": 1}, key="k-1"),
        new_job({"n": 1}, key="k-1"),  # replays the one just before it
        NewJob.build(type="report", payload={"r": 1}, unique=unique),
        NewJob.build(type="report", payload={"r": 2}, unique=unique),  # a duplicate
    ]

    submitted = await store.submit_many(news)

    assert [(each.replayed, each.duplicate) for each in submitted] == [
        (True, False),
        (False, False),
        (True, False),
        (False, False),
        (False, True),
    ]
    assert submitted[0].job.id == first.id
    assert submitted[2].job.id == submitted[1].job.id
    assert submitted[4].job.id == submitted[3].job.id
    assert len(await _pending(store)) == 3


async def test_a_key_reused_with_a_different_job_stores_none_of_the_call(store: JobStore) -> None:
    await store.submit(new_job({"n": 0}, key="k-0"))

    with pytest.raises(IdempotencyConflict):
        await store.submit_many([new_job({"n": 1}), new_job({"n": 2}, key="k-0")])

    assert await _pending(store) == [{"n": 0}]
