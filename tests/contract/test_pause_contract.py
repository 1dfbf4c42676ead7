"""Pausing a queue: nothing of it is claimed until it is resumed, other queues go on."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from jobqueue.domain.flow import QueueLimits, Rate
from jobqueue.domain.outcome import Decision
from jobqueue.domain.ports import JobStore
from jobqueue.domain.status import Status
from tests.contract.steps import LEASE, new_job
from tests.fakes import TEST_TYPES


async def test_a_paused_queue_claims_nothing_until_resumed(store: JobStore) -> None:
    paused = (await store.submit(replace(new_job(), queue="emails"))).job
    other = (await store.submit(new_job())).job

    state = await store.pause_queue("emails")
    assert state.name == "emails"
    assert state.paused
    assert state.paused_at is not None

    assert await store.claim(10, LEASE, "emails", types=TEST_TYPES) == []
    # Carrying endings changes nothing: the claim half still sees the pause.
    held, claimed = await store.record_and_claim([], 10, LEASE, "emails", types=TEST_TYPES)
    assert (held, list(claimed)) == (set(), [])
    assert [job.id for job in await store.claim(10, LEASE, types=TEST_TYPES)] == [other.id]
    assert (await store.get(paused.id)).status is Status.PENDING
    assert await store.paused_queues(["emails", "default", "never-seen"]) == {"emails"}

    resumed = await store.resume_queue("emails")
    assert not resumed.paused
    assert resumed.paused_at is None
    assert await store.paused_queues(["emails"]) == set()
    assert [job.id for job in await store.claim(10, LEASE, "emails", types=TEST_TYPES)] == [
        paused.id
    ]


@pytest.mark.parametrize(
    "limits",
    [
        QueueLimits(concurrency=5),
        QueueLimits(rate=Rate(100, timedelta(seconds=1))),
        QueueLimits(key_concurrency=2),
        QueueLimits(concurrency=5, key_concurrency=2),
    ],
    ids=str,
)
async def test_a_paused_queue_with_limits_claims_nothing_either(
    store: JobStore, limits: QueueLimits
) -> None:
    """Claimed once first, so that the claims after the pause go out as a queue with
    those limits is claimed."""
    for key in ("a", "a", "b", None, None):
        await store.submit(replace(new_job(), queue="q", partition_key=key))
    await store.set_queue_limits("q", limits)
    (running,) = await store.claim(1, LEASE, "q", types=TEST_TYPES)

    await store.pause_queue("q")
    assert list(await store.claim(10, LEASE, "q", types=TEST_TYPES)) == []
    held, more = await store.record_and_claim(
        [(running.lease, Decision.complete())], 10, LEASE, "q", types=TEST_TYPES
    )
    assert (held, list(more)) == ({running.lease}, [])

    await store.resume_queue("q")
    assert list(await store.claim(10, LEASE, "q", types=TEST_TYPES))


async def test_pausing_twice_keeps_the_first_pause_and_resuming_a_running_queue_is_harmless(
    store: JobStore,
) -> None:
    first = await store.pause_queue("a")
    again = await store.pause_queue("a")
    assert again.paused_at == first.paused_at

    assert not (await store.resume_queue("b")).paused
    assert not (await store.resume_queue("a")).paused
    assert not (await store.resume_queue("a")).paused


async def test_a_pause_stops_the_claim_that_carries_endings_too(store: JobStore) -> None:
    running = (await store.submit(replace(new_job(), queue="q"))).job
    waiting = (await store.submit(replace(new_job(), queue="q"))).job
    (claimed,) = await store.claim(1, LEASE, "q", types=TEST_TYPES)
    assert claimed.id == running.id

    await store.pause_queue("q")
    # The running job's ending is recorded; the claim beside it takes nothing.
    held, more = await store.record_and_claim(
        [(claimed.lease, Decision.complete())], 5, LEASE, "q", types=TEST_TYPES
    )
    assert held == {claimed.lease}
    assert list(more) == []
    assert (await store.get(running.id)).status is Status.COMPLETED
    assert (await store.get(waiting.id)).status is Status.PENDING


async def test_queue_summaries_count_live_and_held_jobs_per_queue(store: JobStore) -> None:
    for _ in range(3):
        await store.submit(replace(new_job(), queue="a"))
    await store.submit(replace(new_job(), queue="a", delay=timedelta(hours=1)))
    await store.submit(replace(new_job(), queue="b"))
    (_running,) = await store.claim(1, LEASE, "b", types=TEST_TYPES)
    await store.pause_queue("idle")

    summaries = {summary.state.name: summary for summary in await store.queue_summaries()}

    assert list(summaries) == ["a", "b", "idle"]
    a, b, idle = summaries["a"], summaries["b"], summaries["idle"]
    assert a.counts == {
        Status.WAITING: 0,
        Status.PENDING: 4,
        Status.PROCESSING: 0,
        Status.DEAD_LETTER: 0,
    }
    assert a.due == 3
    assert a.oldest_due_age is not None
    assert timedelta(0) <= a.oldest_due_age < timedelta(minutes=1)
    assert not a.state.paused
    assert b.counts[Status.PROCESSING] == 1
    assert b.counts[Status.PENDING] == 0
    assert b.due == 0
    assert b.oldest_due_age is None
    assert idle.state.paused
    assert sum(idle.counts.values()) == 0

    # One queue's summary alone is the same; a queue nothing names is running and empty.
    for name, listed in summaries.items():
        alone = await store.queue_summary(name)
        assert (alone.state, alone.counts, alone.due) == (listed.state, listed.counts, listed.due)
        assert (alone.oldest_due_age is None) == (listed.oldest_due_age is None)
    nowhere = await store.queue_summary("nowhere")
    assert (nowhere.state.paused, sum(nowhere.counts.values()), nowhere.due) == (False, 0, 0)
