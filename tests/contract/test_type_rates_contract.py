"""Rates per job type, as every store keeps them: a rated type starts at most its rate
within any window of its period, whatever ends, while the queue's other types are
claimed beside it and not held back by it; the queue's own limits still cap the whole;
a changed rate keeps the window, and lifted or undeclared rates pace nothing."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import timedelta

from jobqueue.domain.flow import NO_LIMITS, Limit, QueueLimits, Rate, type_rates
from jobqueue.domain.outcome import Decision
from jobqueue.domain.ports import JobStore
from tests.contract.steps import LEASE, new_job
from tests.fakes import TEST_TYPES

TEN_MINUTES = timedelta(minutes=10)


async def _fill(store: JobStore, job_type: str, count: int, priority: int = 0) -> None:
    for _ in range(count):
        await store.submit(replace(new_job(job_type=job_type), queue="q", priority=priority))


def _email_at(limit: int, concurrency: int | None = None, rate: Rate | None = None) -> QueueLimits:
    """At most `limit` emails started within ten minutes, and the queue's own limits."""
    rated = type_rates({"email": Rate(limit, TEN_MINUTES)})
    return QueueLimits(concurrency, rate, type_rates=rated)


async def test_a_rated_type_starts_at_most_its_rate_beside_the_others(store: JobStore) -> None:
    await _fill(store, "email", 6)
    await _fill(store, "fax", 4)
    state = await store.set_queue_limits("q", _email_at(2))
    assert state.limits == _email_at(2)
    assert state.type_started == (("email", 0),)

    first = await store.claim(10, LEASE, "q", types=TEST_TYPES)
    assert Counter(job.type for job in first) == {"email": 2, "fax": 4}
    assert first.held_back == {Limit.TYPE_RATE}
    assert first.retry_in is None
    assert first.windows_open_in is not None
    assert TEN_MINUTES - timedelta(minutes=1) < first.windows_open_in <= TEN_MINUTES

    # Ending jobs frees no start: the window does.
    endings = [(job.lease, Decision.complete()) for job in first]
    _, second = await store.record_and_claim(endings, 10, LEASE, "q", types=TEST_TYPES)
    assert list(second) == []
    assert second.held_back == {Limit.TYPE_RATE}
    assert (await store.queue_summary("q")).state.type_started == (("email", 2),)

    # Lifted: the rest at once.
    await store.set_queue_limits("q", NO_LIMITS)
    rest = await store.claim(10, LEASE, "q", types=TEST_TYPES)
    assert Counter(job.type for job in rest) == {"email": 4}


async def test_a_spent_type_s_backlog_does_not_keep_the_others_waiting(store: JobStore) -> None:
    # The spent type's jobs are due first and many: the claim still reaches the others.
    await _fill(store, "email", 30)
    await store.set_queue_limits("q", _email_at(1))
    (first,) = await store.claim(1, LEASE, "q", types=["email"])
    assert first.type == "email"
    await _fill(store, "fax", 3)
    for _ in range(3):
        claimed = await store.claim(1, LEASE, "q", types=["email", "fax"])
        assert [job.type for job in claimed] == ["fax"]


async def test_a_type_s_window_spans_its_priorities(store: JobStore) -> None:
    await _fill(store, "email", 3, priority=0)
    await _fill(store, "email", 3, priority=5)
    await store.set_queue_limits("q", _email_at(4))
    claimed = await store.claim(10, LEASE, "q", types=TEST_TYPES)
    assert sorted(job.priority for job in claimed) == [0, 0, 0, 5]


async def test_the_queue_s_own_limits_still_cap_the_whole(store: JobStore) -> None:
    await _fill(store, "email", 5)
    await _fill(store, "fax", 5)
    await store.set_queue_limits("q", _email_at(2, concurrency=3))
    claimed = await store.claim(10, LEASE, "q", types=TEST_TYPES)
    assert len(claimed) == 3
    assert Counter(job.type for job in claimed)["email"] <= 2
    assert Limit.CONCURRENCY in claimed.held_back

    await store.set_queue_limits("q", _email_at(2, rate=Rate(4, TEN_MINUTES)))
    await store.record_many([(job.lease, Decision.complete()) for job in claimed])
    more = await store.claim(10, LEASE, "q", types=TEST_TYPES)
    assert len(more) == 4
    state = (await store.queue_summary("q")).state
    assert state.started == 4
    emails = Counter(job.type for job in [*claimed, *more])["email"]
    assert emails == 2
    assert state.type_started == (("email", 2),)


async def test_a_changed_rate_keeps_its_window(store: JobStore) -> None:
    await _fill(store, "email", 5)
    await store.set_queue_limits("q", _email_at(2))
    assert len(await store.claim(10, LEASE, "q", types=TEST_TYPES)) == 2
    state = await store.set_queue_limits("q", _email_at(3))
    assert state.type_started == (("email", 2),)
    assert len(await store.claim(10, LEASE, "q", types=TEST_TYPES)) == 1


async def test_undeclared_type_rates_pace_nothing(store: JobStore) -> None:
    await _fill(store, "email", 4)
    declared = await store.declare_queue_limits("q", _email_at(1))
    assert declared is not None
    assert declared.limits == _email_at(1)
    assert await store.declare_queue_limits("q", NO_LIMITS) is None
    assert (await store.queue_summary("q")).state.limits == NO_LIMITS
    assert len(await store.claim(10, LEASE, "q", types=TEST_TYPES)) == 4


async def test_rates_added_to_a_limited_queue_hold_from_the_next_claim(store: JobStore) -> None:
    # The store claimed the queue with the statement for limits of the whole queue: that
    # statement must refuse it once it has type rates, not take its jobs unpaced.
    await _fill(store, "email", 6)
    await store.set_queue_limits("q", QueueLimits(concurrency=10))
    assert len(await store.claim(1, LEASE, "q", types=TEST_TYPES)) == 1
    await store.set_queue_limits("q", _email_at(2, concurrency=10))
    assert len(await store.claim(10, LEASE, "q", types=TEST_TYPES)) == 2
    # And back: without type rates, the queue's own limit alone.
    await store.set_queue_limits("q", QueueLimits(concurrency=10))
    assert len(await store.claim(10, LEASE, "q", types=TEST_TYPES)) == 3
