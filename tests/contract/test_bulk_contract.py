"""Retrying and discarding many jobs at once: the oldest that match, at most the limit,
nothing else touched; and counting them first."""

from __future__ import annotations

from dataclasses import replace
from typing import TypedDict, Unpack

import pytest

from jobqueue.domain.bulk import MAX_SELECTED, Selection, SelectionCount
from jobqueue.domain.errors import JobNotFound
from jobqueue.domain.job import Job
from jobqueue.domain.outcome import Decision
from jobqueue.domain.ports import JobStore
from jobqueue.domain.status import Status
from jobqueue.domain.transitions import Operation
from tests.contract.steps import LEASE, new_job
from tests.fakes import TEST_TYPES
from tests.support.endings import record


class _Where(TypedDict, total=False):
    """Where `_ended`'s job goes, instead of `new_job()`'s queue and type."""

    queue: str
    type: str


async def _ended(store: JobStore, decision: Decision, **changes: Unpack[_Where]) -> Job:
    job = (await store.submit(replace(new_job(), **changes))).job
    (claimed,) = await store.claim(1, LEASE, job.queue, types=TEST_TYPES)
    assert claimed.id == job.id
    return await record(store, claimed.lease, decision)


async def test_retry_many_takes_the_oldest_matching_jobs_up_to_the_limit(store: JobStore) -> None:
    dead = [await _ended(store, Decision.dead_letter(f"e{n}"), queue="mail") for n in range(3)]
    other_queue = await _ended(store, Decision.dead_letter("x"), queue="other")
    other_type = await _ended(store, Decision.dead_letter("x"), queue="mail", type="sms")
    failed = await _ended(store, Decision.fail("bad"), queue="mail")

    count = await store.retry_many(
        Selection(Status.DEAD_LETTER, queue="mail", type="email", limit=2)
    )

    assert count == 2
    after = {job.id: await store.get(job.id) for job in [*dead, other_queue, other_type, failed]}
    assert [after[job.id].status for job in dead] == [
        Status.PENDING,
        Status.PENDING,
        Status.DEAD_LETTER,
    ]
    retried = after[dead[0].id]
    assert retried.attempts == 0
    assert [(a.attempt, a.outcome, a.error) for a in retried.history] == [(1, "dead_letter", "e0")]
    assert after[other_queue.id].status is Status.DEAD_LETTER
    assert after[other_type.id].status is Status.DEAD_LETTER
    assert after[failed.id].status is Status.FAILED

    assert await store.retry_many(Selection(Status.FAILED)) == 1
    assert (await store.get(failed.id)).status is Status.PENDING
    assert await store.retry_many(Selection(Status.FAILED)) == 0


async def test_discard_many_deletes_only_what_it_selects(store: JobStore) -> None:
    dead = [await _ended(store, Decision.dead_letter("e")) for _ in range(3)]
    failed = await _ended(store, Decision.fail("bad"))
    completed = await _ended(store, Decision.complete())

    assert await store.discard_many(Selection(Status.DEAD_LETTER, limit=2)) == 2

    for job in dead[:2]:
        with pytest.raises(JobNotFound):
            await store.get(job.id)
    assert (await store.get(dead[2].id)).status is Status.DEAD_LETTER
    assert (await store.get(failed.id)).status is Status.FAILED
    assert (await store.get(completed.id)).status is Status.COMPLETED
    assert await store.discard_many(Selection(Status.FAILED, queue="nowhere")) == 0


async def test_count_selected_counts_every_match_when_it_reads_them_all(
    store: JobStore,
) -> None:
    dead = [await _ended(store, Decision.dead_letter("e"), queue="mail") for _ in range(3)]
    await _ended(store, Decision.dead_letter("x"), queue="other")
    await _ended(store, Decision.dead_letter("x"), queue="mail", type="sms")
    await _ended(store, Decision.fail("bad"), queue="mail")
    pending = (await store.submit(replace(new_job(), queue="mail"))).job

    mail = Selection(Status.DEAD_LETTER, queue="mail", type="email")
    # Few enough to read them all: exact, whatever the limit.
    assert await store.count_selected(mail) == SelectionCount(3, complete=True)
    assert await store.count_selected(replace(mail, limit=1)) == SelectionCount(3, complete=True)
    assert await store.count_selected(Selection(Status.DEAD_LETTER)) == SelectionCount(5, True)
    nowhere = Selection(Status.FAILED, queue="nowhere")
    assert await store.count_selected(nowhere) == SelectionCount(0, complete=True)
    cancel = Selection(Status.PENDING, queue="mail", operation=Operation.CANCEL)
    assert await store.count_selected(cancel) == SelectionCount(1, complete=True)
    # Counting changes nothing.
    assert [(await store.get(job.id)).status for job in dead] == [Status.DEAD_LETTER] * 3
    assert (await store.get(pending.id)).status is Status.PENDING


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"status": Status.COMPLETED}, "status must be cancelled or dead_letter or failed"),
        ({"status": Status.PENDING}, "status must be cancelled or dead_letter or failed"),
        ({"limit": 0}, f"limit must be 1 to {MAX_SELECTED}"),
        ({"limit": MAX_SELECTED + 1}, f"limit must be 1 to {MAX_SELECTED}"),
        ({"queue": "no spaces"}, "queue name must be"),
        ({"type": ""}, "type must be"),
    ],
)
def test_a_selection_refuses_what_no_bulk_call_may_touch(
    changes: dict[str, object], message: str
) -> None:
    fields: dict[str, object] = {"status": Status.DEAD_LETTER, **changes}
    with pytest.raises(ValueError, match=message):
        Selection(**fields)  # type: ignore[arg-type]
