"""Results and progress: a completion keeps what its handler returned, a page of jobs
leaves it out; progress reports are fenced by the lease, kept after the job ended, and
the ending writes the last one."""

from __future__ import annotations

from datetime import timedelta

from jobqueue.domain.listing import JobQuery
from jobqueue.domain.outcome import Decision
from jobqueue.domain.ports import JobStore
from jobqueue.domain.progress import Progress
from jobqueue.domain.status import Status
from tests.contract.steps import LEASE, claim_only, job_in, submit
from tests.support.endings import record

RESULT = '{"pages":[1,2,3],"title":"naïve ☃ 😀","big":12345678901234567890}'


async def test_a_completion_keeps_the_handler_s_result(store: JobStore) -> None:
    claimed = await job_in(store, Status.PROCESSING)

    completed = await record(store, claimed.lease, Decision.complete(RESULT))

    assert completed.status is Status.COMPLETED
    assert completed.result == {
        "pages": [1, 2, 3],
        "title": "naïve ☃ 😀",
        "big": 12345678901234567890,
    }
    assert (await store.get(claimed.id)).result == completed.result


async def test_a_completion_without_a_result_keeps_none(store: JobStore) -> None:
    claimed = await job_in(store, Status.PROCESSING)

    completed = await record(store, claimed.lease, Decision.complete())

    assert completed.result is None


async def test_a_page_of_jobs_leaves_results_out(store: JobStore) -> None:
    claimed = await job_in(store, Status.PROCESSING)
    await record(store, claimed.lease, Decision.complete(RESULT))

    page = await store.list_jobs(JobQuery(status=Status.COMPLETED))

    assert [job.id for job in page.jobs] == [claimed.id]
    assert page.jobs[0].result is None


async def test_progress_is_written_while_the_lease_holds(store: JobStore) -> None:
    claimed = await job_in(store, Status.PROCESSING)
    report = Progress.build(done=3, total=4, message="page 3 of 4")

    held = await store.record_progress([(claimed.lease, report)])

    assert held == {claimed.lease}
    kept = (await store.get(claimed.id)).progress
    assert kept is not None
    assert (kept.fraction, kept.done, kept.total, kept.message) == (0.75, 3, 4, "page 3 of 4")
    assert kept.at is not None
    assert claimed.started_at is not None
    assert abs(kept.at - claimed.started_at) < timedelta(minutes=1)


async def test_a_stale_attempt_s_progress_is_dropped(store: JobStore) -> None:
    job = await submit(store)
    first = await claim_only(store, job)
    await record(store, first.lease, Decision.release())
    second = await claim_only(store, job)
    await store.record_progress([(second.lease, Progress.build(0.5))])

    held = await store.record_progress([(first.lease, Progress.build(0.9))])

    assert held == set()
    kept = (await store.get(job.id)).progress
    assert kept is not None
    assert kept.fraction == 0.5


async def test_a_finished_job_keeps_its_progress_and_refuses_more(store: JobStore) -> None:
    claimed = await job_in(store, Status.PROCESSING)
    await store.record_progress([(claimed.lease, Progress.build(0.25))])
    completed = await record(store, claimed.lease, Decision.complete())

    held = await store.record_progress([(claimed.lease, Progress.build(1.0))])

    assert held == set()
    assert completed.progress is not None
    assert completed.progress.fraction == 0.25
    kept = (await store.get(claimed.id)).progress
    assert kept is not None
    assert kept.fraction == 0.25


async def test_an_ending_writes_the_attempt_s_last_report(store: JobStore) -> None:
    claimed = await job_in(store, Status.PROCESSING)
    await store.record_progress([(claimed.lease, Progress.build(0.25))])
    last = Progress.build(message="gave up at row 7")

    failed = await record(store, claimed.lease, Decision.fail("boom").with_progress(last))

    assert failed.progress is not None
    assert (failed.progress.fraction, failed.progress.message) == (None, "gave up at row 7")


async def test_a_retry_keeps_the_last_attempt_s_progress(store: JobStore) -> None:
    claimed = await job_in(store, Status.PROCESSING)
    last = Progress.build(0.4)
    await record(store, claimed.lease, Decision.dead_letter("no").with_progress(last))

    retried = await store.retry(claimed.id)
    again = await claim_only(store, retried, LEASE)

    assert again.progress is not None
    assert again.progress.fraction == 0.4
