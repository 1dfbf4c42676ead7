"""A queue's limits, as every store keeps them: a claim takes no more than the queue's
concurrency leaves (the running jobs are its slots, freed by their endings, also those the
same call writes, and by lease recovery), and no more starts than its rate leaves, saying
how long until it lets more; an operator's limits stand over declared ones."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from jobqueue.domain.flow import NO_LIMITS, Limit, LimitsSource, QueueLimits, Rate
from jobqueue.domain.outcome import Decision
from jobqueue.domain.ports import JobStore
from tests.contract.steps import LEASE, SHORT_LEASE, eventually, new_job
from tests.fakes import TEST_TYPES


async def _fill(store: JobStore, count: int, queue: str = "q") -> None:
    for _ in range(count):
        await store.submit(replace(new_job(), queue=queue))


async def test_a_concurrency_limit_caps_what_claims_take_until_jobs_end(store: JobStore) -> None:
    await _fill(store, 6)
    state = await store.set_queue_limits("q", QueueLimits(concurrency=2))
    assert (state.limits, state.limits_source, state.running) == (
        QueueLimits(concurrency=2),
        LimitsSource.OPERATOR,
        0,
    )

    first = await store.claim(10, LEASE, "q", types=TEST_TYPES)
    assert len(first) == 2
    assert first.held_back == {Limit.CONCURRENCY}
    assert first.retry_in is None
    assert list(await store.claim(10, LEASE, "q", types=TEST_TYPES)) == []
    # Another queue is not held back by this one's limit.
    await _fill(store, 1, queue="other")
    assert len(await store.claim(10, LEASE, "other", types=TEST_TYPES)) == 1

    # The slots the same call frees are its claim's to take.
    endings = [(job.lease, Decision.complete()) for job in first]
    held, second = await store.record_and_claim(endings, 10, LEASE, "q", types=TEST_TYPES)
    assert held == {job.lease for job in first}
    assert len(second) == 2
    assert (await store.queue_summary("q")).state.running == 2

    # Lifted: the rest at once.
    assert (await store.set_queue_limits("q", NO_LIMITS)).limits_source is None
    rest = await store.claim(10, LEASE, "q", types=TEST_TYPES)
    assert len(rest) == 2
    assert not rest.held_back


async def test_a_killed_process_s_slots_come_back_with_its_leases(store: JobStore) -> None:
    await _fill(store, 2)
    await store.set_queue_limits("q", QueueLimits(concurrency=1))
    (lost,) = await store.claim(10, SHORT_LEASE, "q", types=TEST_TYPES)
    assert list(await store.claim(10, LEASE, "q", types=TEST_TYPES)) == []
    await eventually(lambda: store.recover_expired(10), "the lease ran out")
    (next_one,) = await store.claim(1, LEASE, "q", types=TEST_TYPES)
    assert next_one.queue == "q"
    assert (await store.get(lost.id)).attempts == 1


async def test_a_rate_caps_starts_and_says_when_the_window_opens(store: JobStore) -> None:
    await _fill(store, 5)
    rate = Rate(3, timedelta(minutes=10))
    await store.set_queue_limits("q", QueueLimits(rate=rate))

    first = await store.claim(2, LEASE, "q", types=TEST_TYPES)
    assert len(first) == 2
    assert not first.held_back
    assert first.retry_in is None
    second = await store.claim(10, LEASE, "q", types=TEST_TYPES)
    assert len(second) == 1
    assert second.held_back == {Limit.RATE}
    assert second.retry_in is not None
    assert timedelta(minutes=9) < second.retry_in <= timedelta(minutes=10)
    # Ending jobs frees no start: the window does.
    endings = [(job.lease, Decision.complete()) for job in [*first, *second]]
    _, third = await store.record_and_claim(endings, 10, LEASE, "q", types=TEST_TYPES)
    assert list(third) == []
    assert third.held_back == {Limit.RATE}
    state = (await store.queue_summary("q")).state
    assert (state.limits.rate, state.started, state.running) == (rate, 3, None)


async def test_an_operator_s_limits_stand_over_declared_ones(store: JobStore) -> None:
    declared = await store.declare_queue_limits("q", QueueLimits(concurrency=4))
    assert declared is not None
    assert declared.limits_source is LimitsSource.SETTINGS

    await store.set_queue_limits("q", QueueLimits(concurrency=1))
    assert await store.declare_queue_limits("q", QueueLimits(concurrency=4)) is None
    assert await store.declare_queue_limits("q", NO_LIMITS) is None
    state = (await store.queue_summary("q")).state
    assert (state.limits, state.limits_source) == (
        QueueLimits(concurrency=1),
        LimitsSource.OPERATOR,
    )

    # Lifted by an operator, the settings may declare again; declaring none lifts theirs.
    await store.set_queue_limits("q", NO_LIMITS)
    assert await store.declare_queue_limits("q", QueueLimits(concurrency=4)) is not None
    assert await store.declare_queue_limits("q", NO_LIMITS) is None
    assert (await store.queue_summary("q")).state.limits == NO_LIMITS
