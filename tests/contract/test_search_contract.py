"""The jobs browser's listings: pages backward as well as forward, a range of when
finished jobs finished, a search that reads a bounded budget of rows and says where it
stopped, and a job found by its key."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from jobqueue.domain.job import Job
from jobqueue.domain.listing import JobPage, JobQuery, KeyKind, KeyLookup, Search
from jobqueue.domain.outcome import Decision
from jobqueue.domain.ports import JobStore
from jobqueue.domain.status import Status
from tests.contract.steps import LEASE, new_job
from tests.fakes import TEST_TYPES
from tests.support.endings import record

TYPES = ("email", "sms", "fax")


async def failed_jobs(store: JobStore, count: int) -> list[Job]:
    """`count` failed jobs, one at a time, over three types; every other one's error
    says SMTP."""
    ended = []
    for n in range(count):
        await store.submit(new_job({"n": n}, job_type=TYPES[n % 3]))
        [claimed] = await store.claim(1, LEASE, types=TEST_TYPES)
        error = f"SMTP timeout {n}" if n % 2 == 0 else f"bad input {n}"
        ended.append(await record(store, claimed.lease, Decision.fail(error)))
    return sorted(ended, key=lambda job: (job.updated_at, job.id.int), reverse=True)


async def forward(store: JobStore, query: JobQuery) -> list[JobPage]:
    pages = [await store.list_jobs(query)]
    while pages[-1].next is not None:
        assert len(pages) <= 60, "pagination does not end"
        pages.append(await store.list_jobs(replace(query, after=pages[-1].next)))
    return pages


async def backward(store: JobStore, query: JobQuery, last: JobPage) -> list[Job]:
    """Every job from `last` back to the start, read page by page backward."""
    found = list(last.jobs)
    before = last.previous
    while before is not None:
        page = await store.list_jobs(replace(query, after=None, before=before))
        found[:0] = page.jobs
        before = page.previous
    return found


@pytest.mark.parametrize("job_type", [None, "sms"])
async def test_failed_jobs_page_backward_to_where_they_started(
    store: JobStore, job_type: str | None
) -> None:
    ended = await failed_jobs(store, 8)
    expected = [job.id for job in ended if job_type in (None, job.type)]
    query = JobQuery(Status.FAILED, job_type, limit=3)

    pages = await forward(store, query)

    assert [job.id for page in pages for job in page.jobs] == expected
    assert pages[0].previous is None
    assert [job.id for job in await backward(store, query, pages[-1])] == expected


async def test_pending_jobs_page_backward_in_the_order_claims_take_them(store: JobStore) -> None:
    for n, (queue, priority) in enumerate([("a", 5), ("b", 0), ("a", 0), ("a", 5), ("b", 9)]):
        await store.submit(replace(new_job({"n": n}), queue=queue, priority=priority))
    query = JobQuery(Status.PENDING, limit=2)

    pages = await forward(store, query)
    listed = [job.id for page in pages for job in page.jobs]

    assert len(listed) == 5
    assert [job.id for job in await backward(store, query, pages[-1])] == listed


@pytest.mark.parametrize("job_type", [None, "email"])
@pytest.mark.parametrize("budget", [1, 2, 4, 100])
async def test_a_search_within_its_budget_finds_every_match_once_page_after_page(
    store: JobStore, job_type: str | None, budget: int
) -> None:
    ended = await failed_jobs(store, 9)
    expected = [
        job.id
        for job in ended
        if job_type in (None, job.type) and "smtp" in (job.last_error or "").lower()
    ]
    query = JobQuery(Status.FAILED, job_type, limit=2, search=Search(error="smtp", budget=budget))

    pages = await forward(store, query)

    assert [job.id for page in pages for job in page.jobs] == expected
    if budget < (9 if job_type is None else 3):
        assert any(page.searched is not None for page in pages), "a small budget cut pages short"
        assert all(page.searched <= budget for page in pages if page.searched is not None)
    else:
        assert all(page.searched is None for page in pages)


async def test_a_search_cut_short_says_how_many_it_read_and_where_it_stopped(
    store: JobStore,
) -> None:
    ended = await failed_jobs(store, 6)
    search = Search(error="no such text", budget=4)

    page = await store.list_jobs(JobQuery(Status.FAILED, "email", limit=5, search=search))
    whole = await store.list_jobs(JobQuery(Status.FAILED, limit=5, search=Search(error="nothing")))

    emails = [job for job in ended if job.type == "email"]
    assert page.jobs == ()
    # Two email jobs exist, fewer than the budget: the search read them all, not cut short.
    assert (page.searched, page.next) == (None, None)
    assert len(emails) == 2
    assert whole.jobs == ()
    assert whole.next is None


async def test_a_search_by_queue_and_creation_time_keeps_what_matches(store: JobStore) -> None:
    for n in range(4):
        await store.submit(replace(new_job({"n": n}), queue=("mail", "other")[n % 2]))
    claimed = [
        job
        for queue in ("mail", "other")
        for job in await store.claim(4, LEASE, queue, types=TEST_TYPES)
    ]
    done = [await record(store, job.lease, Decision.complete()) for job in claimed]
    assert len(done) == 4
    created = min(job.created_at for job in done)

    in_mail = await store.list_jobs(JobQuery(Status.COMPLETED, search=Search(queue="mail")))
    later = await store.list_jobs(
        JobQuery(Status.COMPLETED, search=Search(created_from=created + timedelta(days=1)))
    )

    assert {job.queue for job in in_mail.jobs} == {"mail"}
    assert len(in_mail.jobs) == 2
    assert later.jobs == ()


async def test_a_finished_range_keeps_jobs_that_finished_within_it(store: JobStore) -> None:
    ended = await failed_jobs(store, 5)
    middle = ended[2]

    newer = await store.list_jobs(JobQuery(Status.FAILED, finished_from=middle.updated_at))
    older = await store.list_jobs(JobQuery(Status.FAILED, finished_until=middle.updated_at))

    assert {job.id for job in newer.jobs} == {
        job.id for job in ended if job.updated_at >= middle.updated_at
    }
    assert {job.id for job in older.jobs} == {
        job.id for job in ended if job.updated_at < middle.updated_at
    }


def test_a_finished_range_of_jobs_that_have_not_finished_is_refused() -> None:
    with pytest.raises(ValueError, match="have not finished"):
        JobQuery(Status.PENDING, finished_until=datetime(2030, 1, 1, tzinfo=UTC))


async def test_a_job_is_found_by_its_idempotency_key_or_the_unique_key_it_holds(
    store: JobStore,
) -> None:
    keyed = (await store.submit(new_job(key="order-7"))).job
    holding = replace(new_job(), unique_key="invoice-9", unique_states=("pending", "processing"))
    unique = (await store.submit(holding)).job

    by_key = await store.find_by_key(KeyLookup(KeyKind.IDEMPOTENCY, "order-7"))
    by_unique = await store.find_by_key(KeyLookup(KeyKind.UNIQUE, unique.unique_key or ""))
    missing = await store.find_by_key(KeyLookup(KeyKind.IDEMPOTENCY, "order-8"))

    assert (by_key and by_key.id, by_unique and by_unique.id) == (keyed.id, unique.id)
    assert missing is None
