"""A per-key limit, as every store keeps it: no key has more running jobs than the limit
(its running jobs are its slots, freed by their endings, also those the same call
writes), claims take from key after key what each key's slots allow and resume after
the last key they took from, so a key with few jobs is not starved by one with many; jobs
without a key are claimed beside them; the queue's own limits still cap the whole. A
rate per key caps each key's starts within its period, whatever ends."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import replace
from datetime import timedelta

from jobqueue.adapters.postgres.queries.keys import SWEEP_EVERY, SWEEP_PROBE
from jobqueue.domain.flow import NO_LIMITS, Limit, QueueLimits, Rate
from jobqueue.domain.outcome import Decision
from jobqueue.domain.ports import JobStore
from tests.contract.steps import LEASE, new_job
from tests.fakes import TEST_TYPES


async def _fill(store: JobStore, key: str | None, count: int) -> None:
    for _ in range(count):
        await store.submit(replace(new_job(), queue="q", partition_key=key))


async def test_a_key_runs_at_most_its_limit_and_claims_rotate_between_keys(
    store: JobStore,
) -> None:
    await _fill(store, "a", 6)
    await _fill(store, "b", 2)
    await _fill(store, "c", 1)
    state = await store.set_queue_limits("q", QueueLimits(key_concurrency=2))
    assert state.limits == QueueLimits(key_concurrency=2)
    assert state.running == 0

    first = await store.claim(3, LEASE, "q", types=TEST_TYPES)
    assert [job.partition_key for job in first] == ["a", "a", "b"]
    # From the key after the last it took from: "c", then round to "b" ("a" is full).
    second = await store.claim(10, LEASE, "q", types=TEST_TYPES)
    assert sorted(str(job.partition_key) for job in second) == ["b", "c"]
    assert second.held_back == {Limit.KEY_CONCURRENCY}
    assert list(await store.claim(10, LEASE, "q", types=TEST_TYPES)) == []
    assert (await store.queue_summary("q")).state.running == 5

    # An ending frees its key's slot, also for the claim in the same call.
    a_job = first[0]
    held, third = await store.record_and_claim(
        [(a_job.lease, Decision.complete())], 10, LEASE, "q", types=TEST_TYPES
    )
    assert held == {a_job.lease}
    assert [job.partition_key for job in third] == ["a"]

    # Lifted: the rest of "a" at once.
    await store.set_queue_limits("q", NO_LIMITS)
    rest = await store.claim(10, LEASE, "q", types=TEST_TYPES)
    assert Counter(job.partition_key for job in rest) == {"a": 3}


async def test_claims_resume_after_the_last_key_they_took_from(store: JobStore) -> None:
    for key in "abcde":
        await _fill(store, key, 3)
    await store.set_queue_limits("q", QueueLimits(key_concurrency=5))
    taken = []
    for _ in range(4):
        claimed = await store.claim(2, LEASE, "q", types=TEST_TYPES)
        taken.append(sorted(str(job.partition_key) for job in claimed))
    assert taken == [["a", "a"], ["b", "b"], ["c", "c"], ["d", "d"]]


async def test_the_queue_s_own_limit_caps_the_keys_together(store: JobStore) -> None:
    await _fill(store, "a", 5)
    await _fill(store, "b", 5)
    await store.set_queue_limits("q", QueueLimits(concurrency=3, key_concurrency=2))
    claimed = await store.claim(10, LEASE, "q", types=TEST_TYPES)
    assert [job.partition_key for job in claimed] == ["a", "a", "b"]
    assert Limit.CONCURRENCY in claimed.held_back


async def test_jobs_without_a_key_are_claimed_beside_the_keys(store: JobStore) -> None:
    await _fill(store, None, 2)
    await _fill(store, "a", 3)
    await store.set_queue_limits("q", QueueLimits(key_concurrency=1))
    claimed = await store.claim(10, LEASE, "q", types=TEST_TYPES)
    assert sorted(str(job.partition_key) for job in claimed) == ["None", "None", "a"]
    assert (await store.get(claimed[0].id)).partition_key == claimed[0].partition_key


async def test_jobs_without_a_key_behind_a_key_s_backlog_are_found_within_bounded_claims(
    store: JobStore,
) -> None:
    """Behind 100 due jobs of a full key, 3 without one: PostgreSQL's claims sweep for
    them, one claim in `SWEEP_EVERY` while none are found, each sweep reading
    `SWEEP_PROBE` due jobs further on (the in-memory store looks at every job)."""
    await _fill(store, "a", 100)
    await _fill(store, None, 3)
    await store.set_queue_limits("q", QueueLimits(key_concurrency=1))
    taken: list[str | None] = []
    claims = 0
    while taken.count(None) < 3:
        claims += 1
        assert claims <= (100 // SWEEP_PROBE + 1) * SWEEP_EVERY + 3, taken
        taken += [job.partition_key for job in await store.claim(10, LEASE, "q", types=TEST_TYPES)]
    assert taken.count("a") == 1  # its one slot, held throughout


async def test_a_job_keeps_its_partition_key(store: JobStore) -> None:
    submitted = await store.submit(replace(new_job(), queue="q", partition_key="tenant-7"))
    assert submitted.job.partition_key == "tenant-7"
    assert (await store.get(submitted.job.id)).partition_key == "tenant-7"


async def test_claims_made_at_once_by_a_process_that_has_not_claimed_yet(
    store: JobStore,
) -> None:
    """A process's claims of a queue go out with the statements its last answer chose;
    several at once, before the first answer, each go out without limits, are refused,
    and claim again: each answer is read as the statement it answers."""
    await _fill(store, "a", 4)
    await _fill(store, "b", 4)
    await store.set_queue_limits("q", QueueLimits(key_concurrency=2))
    claims = await asyncio.gather(*(store.claim(2, LEASE, "q", types=TEST_TYPES) for _ in range(4)))
    taken = Counter(job.partition_key for claimed in claims for job in claimed)
    assert taken == {"a": 2, "b": 2}


async def test_a_key_rate_caps_each_key_s_starts_and_says_when_a_window_opens(
    store: JobStore,
) -> None:
    await _fill(store, "a", 5)
    await _fill(store, "b", 1)
    period = timedelta(minutes=10)
    await store.set_queue_limits("q", QueueLimits(key_rate=Rate(2, period)))
    claimed = await store.claim(10, LEASE, "q", types=TEST_TYPES)
    assert Counter(job.partition_key for job in claimed) == {"a": 2, "b": 1}
    assert claimed.held_back == {Limit.KEY_RATE}
    assert claimed.windows_open_in is not None
    assert period - timedelta(seconds=30) < claimed.windows_open_in <= period

    # Its jobs' endings free no start: the window does, not the slots.
    endings = [(job.lease, Decision.complete()) for job in claimed]
    held, more = await store.record_and_claim(endings, 10, LEASE, "q", types=TEST_TYPES)
    assert held == {job.lease for job in claimed}
    assert list(more) == []
    assert more.held_back == {Limit.KEY_RATE}

    # A new key starts at once; the rate is per key.
    await _fill(store, "c", 3)
    fresh = await store.claim(10, LEASE, "q", types=TEST_TYPES)
    assert [job.partition_key for job in fresh] == ["c", "c"]

    # Lifted: the rest at once.
    await store.set_queue_limits("q", NO_LIMITS)
    rest = await store.claim(10, LEASE, "q", types=TEST_TYPES)
    assert Counter(job.partition_key for job in rest) == {"a": 3, "c": 1}


async def test_a_key_rate_and_a_key_concurrency_each_hold(store: JobStore) -> None:
    await _fill(store, "a", 6)
    limits = QueueLimits(key_concurrency=1, key_rate=Rate(2, timedelta(minutes=10)))
    await store.set_queue_limits("q", limits)
    first = await store.claim(10, LEASE, "q", types=TEST_TYPES)
    assert len(first) == 1
    assert first.held_back == {Limit.KEY_CONCURRENCY}
    # Its ending frees the slot, and the window has one start left.
    _, second = await store.record_and_claim(
        [(first[0].lease, Decision.complete())], 10, LEASE, "q", types=TEST_TYPES
    )
    assert len(second) == 1
    _, third = await store.record_and_claim(
        [(second[0].lease, Decision.complete())], 10, LEASE, "q", types=TEST_TYPES
    )
    assert list(third) == []
    assert third.held_back == {Limit.KEY_RATE}
    state = (await store.queue_summary("q")).state
    assert state.limits == limits


async def test_retention_forgets_the_windows_of_keys_whose_starts_left_the_period(
    store: JobStore,
) -> None:
    await _fill(store, "a", 2)
    await _fill(store, "b", 2)
    await store.set_queue_limits("q", QueueLimits(key_rate=Rate(1, timedelta(minutes=10))))
    assert len(await store.claim(10, LEASE, "q", types=TEST_TYPES)) == 2
    # Within the period, the windows hold: forgetting them would let the keys start more.
    assert await store.prune_key_starts(10) == 0
    assert list(await store.claim(10, LEASE, "q", types=TEST_TYPES)) == []
    # Without a key rate, no window holds anything.
    await store.set_queue_limits("q", QueueLimits(key_concurrency=5))
    assert await store.prune_key_starts(1) == 1
    assert await store.prune_key_starts(10) == 1
    assert await store.prune_key_starts(10) == 0
