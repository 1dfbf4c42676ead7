"""Listing: `list_jobs` returns one status's jobs in that status's order, ties by id, and
pages through them so that every job is seen exactly once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

import pytest

from jobqueue.domain.job import Job
from jobqueue.domain.listing import JobPage, JobQuery, position_of
from jobqueue.domain.outcome import Decision
from jobqueue.domain.ports import JobStore
from jobqueue.domain.status import TRAITS, Status
from tests.contract.steps import LEASE, claim_only, job_in, new_job, submit
from tests.fakes import TEST_TYPES
from tests.support.endings import complete_many, record


def in_list_order(jobs: Sequence[Job], status: Status) -> list[Job]:
    order = TRAITS[status].order
    return sorted(jobs, key=lambda job: position_of(job).ordered, reverse=order.descending)


async def all_pages(store: JobStore, query: JobQuery) -> list[JobPage]:
    pages = [await store.list_jobs(query)]
    while pages[-1].next is not None:
        assert len(pages) <= 50, "pagination does not end"
        pages.append(
            await store.list_jobs(JobQuery(query.status, query.type, query.limit, pages[-1].next))
        )
    return pages


async def completed_together(store: JobStore, count: int) -> list[Job]:
    """`count` jobs completed in one write: they share one `updated_at`, so only their
    ids order them."""
    for _ in range(count):
        await submit(store)
    claimed = await store.claim(count, LEASE, types=TEST_TYPES)
    assert len(claimed) == count
    done = await complete_many(store, [job.lease for job in claimed])
    assert done == {job.lease for job in claimed}
    return [await store.get(job.id) for job in claimed]


@pytest.mark.parametrize("status", list(Status))
async def test_lists_only_jobs_of_the_status_asked_for_in_its_order(
    store: JobStore, status: Status
) -> None:
    for other in Status:
        # A waiting job's blocker is pending: it would be listed with the pending jobs.
        if other not in (status, Status.PENDING) and (other, status) != (
            Status.WAITING,
            Status.PENDING,
        ):
            await job_in(store, other)
    # Pending jobs last, by plain submission: they are due, and making a job in any other
    # status would claim them.
    if status is Status.PENDING:
        wanted = [await submit(store) for _ in range(3)]
    else:
        wanted = [await job_in(store, status) for _ in range(3)]
        await submit(store)

    page = await store.list_jobs(JobQuery(status))

    assert list(page.jobs) == in_list_order(wanted, status)
    assert page.next is None


async def test_dead_letters_are_listed_newest_first(store: JobStore) -> None:
    first, second = [await job_in(store, Status.DEAD_LETTER) for _ in range(2)]

    dead = await store.list_jobs(JobQuery(Status.DEAD_LETTER))

    assert [job.id for job in dead.jobs] == [second.id, first.id]


async def test_pending_jobs_are_listed_soonest_due_first(store: JobStore) -> None:
    later = await submit(store)
    # Retried with a delay: due after a job submitted after it.
    await record(
        store,
        (await claim_only(store, later)).lease,
        Decision.backoff(timedelta(hours=1), "not yet"),
    )
    sooner = await submit(store)

    page = await store.list_jobs(JobQuery(Status.PENDING))

    assert [job.id for job in page.jobs] == [sooner.id, later.id]


async def test_processing_jobs_are_listed_by_when_their_lease_runs_out(store: JobStore) -> None:
    await submit(store)
    [long] = await store.claim(1, timedelta(hours=2), types=TEST_TYPES)
    await submit(store)
    [short] = await store.claim(1, timedelta(hours=1), types=TEST_TYPES)

    page = await store.list_jobs(JobQuery(Status.PROCESSING))

    assert [job.id for job in page.jobs] == [short.id, long.id]


async def test_type_filter_keeps_only_jobs_of_that_type(store: JobStore) -> None:
    emails = [await submit(store, job_type="email") for _ in range(2)]
    await submit(store, job_type="sms")

    page = await store.list_jobs(JobQuery(Status.PENDING, type="email"))
    none = await store.list_jobs(JobQuery(Status.PENDING, type="fax"))

    assert list(page.jobs) == in_list_order(emails, Status.PENDING)
    assert none == JobPage((), None)


async def test_type_filter_narrows_failed_jobs(store: JobStore) -> None:
    failed = await job_in(store, Status.FAILED)
    await submit(store, job_type="sms")
    [sms] = await store.claim(10, LEASE, types=TEST_TYPES)
    await record(store, sms.lease, Decision.fail("no"))

    page = await store.list_jobs(JobQuery(Status.FAILED, type="email"))

    assert [job.id for job in page.jobs] == [failed.id]


async def test_limit_caps_the_page_and_says_where_the_next_one_starts(store: JobStore) -> None:
    jobs = in_list_order([await submit(store) for _ in range(3)], Status.PENDING)

    page = await store.list_jobs(JobQuery(Status.PENDING, limit=2))

    assert list(page.jobs) == jobs[:2]
    assert page.next == position_of(jobs[1])


async def test_a_page_ending_at_the_last_job_has_no_next(store: JobStore) -> None:
    jobs = [await submit(store) for _ in range(2)]

    page = await store.list_jobs(JobQuery(Status.PENDING, limit=2))

    assert {job.id for job in page.jobs} == {job.id for job in jobs}
    assert page.next is None


async def test_no_matching_job_is_an_empty_last_page(store: JobStore) -> None:
    await submit(store)

    assert await store.list_jobs(JobQuery(Status.DEAD_LETTER)) == JobPage((), None)


@pytest.mark.parametrize("limit", [1, 2, 3, 7])
async def test_pages_visit_every_job_exactly_once_in_order_across_ties(
    store: JobStore, limit: int
) -> None:
    # Two groups completed in one write each: ties on updated_at inside each group, so
    # page boundaries fall inside runs of equal keys and only the id can place them.
    jobs = await completed_together(store, 4) + await completed_together(store, 3)
    assert len({job.updated_at for job in jobs}) == 2

    pages = await all_pages(store, JobQuery(Status.COMPLETED, limit=limit))

    listed = [job for page in pages for job in page.jobs]
    assert listed == in_list_order(jobs, Status.COMPLETED)
    assert all(len(page.jobs) == limit for page in pages[:-1])
    assert 1 <= len(pages[-1].jobs) <= limit


async def test_pages_of_a_type_visit_only_that_type(store: JobStore) -> None:
    emails = [await submit(store, job_type="email") for _ in range(5)]
    for _ in range(4):
        await submit(store, job_type="sms")

    pages = await all_pages(store, JobQuery(Status.PENDING, type="email", limit=2))

    assert [job for page in pages for job in page.jobs] == in_list_order(emails, Status.PENDING)
    assert len(pages) == 3


@pytest.mark.parametrize("limit", [0, 501, -1])
def test_a_limit_out_of_range_is_refused(limit: int) -> None:
    with pytest.raises(ValueError, match="between 1 and 500"):
        JobQuery(Status.PENDING, limit=limit)


def test_completed_jobs_cannot_be_listed_by_queue() -> None:
    with pytest.raises(ValueError, match="no index holds them by queue"):
        JobQuery(Status.COMPLETED, queue="mail")


@pytest.mark.parametrize("status", [Status.COMPLETED, Status.FAILED])
async def test_finished_jobs_by_type_and_of_every_type_page_after_page_newest_first(
    store: JobStore, status: Status
) -> None:
    decision = Decision.complete() if status is Status.COMPLETED else Decision.fail("no")
    ended: list[Job] = []
    for n in range(7):
        submitted = await store.submit(new_job({"n": n}, job_type=("email", "sms", "fax")[n % 3]))
        [claimed] = await store.claim(1, LEASE, types=TEST_TYPES)
        assert claimed.id == submitted.job.id
        ended.append(await record(store, claimed.lease, decision))

    async def pages(job_type: str | None) -> list[Job]:
        found: list[Job] = []
        after = None
        while True:
            page = await store.list_jobs(JobQuery(status, job_type, limit=2, after=after))
            found.extend(page.jobs)
            if (after := page.next) is None:
                return found

    newest_first = sorted(ended, key=lambda job: (job.updated_at, job.id.int), reverse=True)
    assert [job.id for job in await pages(None)] == [job.id for job in newest_first]
    assert [job.id for job in await pages("sms")] == [
        job.id for job in newest_first if job.type == "sms"
    ]
    assert await pages("none") == []


async def test_a_queue_narrows_every_narrowable_status_page_after_page(store: JobStore) -> None:
    for n in range(5):
        await store.submit(replace(new_job({"n": n}), queue="mail", priority=n % 2))
        await store.submit(replace(new_job({"n": n}), queue="other"))
    mail = [job for job in await store.claim(2, LEASE, "mail", types=TEST_TYPES)]
    for job in mail:
        await record(store, job.lease, Decision.dead_letter("smtp"))

    pending: list[Job] = []
    after = None
    while True:
        page = await store.list_jobs(JobQuery(Status.PENDING, limit=2, after=after, queue="mail"))
        pending.extend(page.jobs)
        if (after := page.next) is None:
            break
    dead = await store.list_jobs(JobQuery(Status.DEAD_LETTER, queue="mail"))
    none = await store.list_jobs(JobQuery(Status.DEAD_LETTER, queue="other"))

    assert len(pending) == 3
    assert {job.queue for job in pending} == {"mail"}
    assert [job.priority for job in pending] == sorted(job.priority for job in pending)
    assert {job.id for job in dead.jobs} == {job.id for job in mail}
    assert none.jobs == ()


async def test_pending_jobs_are_listed_as_claims_take_them_page_after_page(
    store: JobStore,
) -> None:
    placed = [("a", 5), ("b", 0), ("a", 0), ("a", 5), ("b", 9), ("a", 9), ("b", 0)]
    for n, (queue, priority) in enumerate(placed):
        await store.submit(replace(new_job({"n": n}), queue=queue, priority=priority))

    listed: list[Job] = []
    after = None
    while True:
        page = await store.list_jobs(JobQuery(Status.PENDING, limit=2, after=after))
        listed.extend(page.jobs)
        if page.next is None:
            break
        after = page.next

    assert [(job.queue, job.priority) for job in listed] == sorted(placed)
    assert len({job.id for job in listed}) == len(placed)
    # Within a queue and priority, soonest due first.
    for queue, priority in set(placed):
        runs = [j.run_at for j in listed if (j.queue, j.priority) == (queue, priority)]
        assert runs == sorted(runs)
