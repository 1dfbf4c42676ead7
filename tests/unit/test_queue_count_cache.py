"""The dashboard's counts per queue: counted once, then served as they are while a single
recount runs in the background, spaced by its own duration."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest

from jobqueue.adapters.postgres.queue_counts import INLINE_BELOW, SPACING, CountCache, Rows

FIVE = timedelta(seconds=5)


class Counter:
    """A count that takes `took` seconds of a fake clock, and waits for `release` when
    the test holds it."""

    def __init__(self) -> None:
        self.now = 100.0
        self.calls = 0
        # Slow enough to be kept (`INLINE_BELOW`), unless a test says otherwise.
        self.took = 0.5
        self.release: asyncio.Event | None = None
        self.fail = False

    def clock(self) -> float:
        return self.now

    async def count(self) -> Rows:
        self.calls += 1
        if self.release is not None:
            await self.release.wait()
        self.now += self.took
        if self.fail:
            raise ConnectionError("database gone")
        return [{"queue": "q", "jobs": self.calls}]


async def _settle(cache: CountCache) -> None:
    # Let a background recount run to its end.
    for _ in range(5):
        await asyncio.sleep(0)


async def test_the_first_view_counts_and_the_next_ones_within_max_age_do_not() -> None:
    counter = Counter()
    cache = CountCache(counter.count, counter.clock)

    rows, age = await cache.rows(FIVE)
    counter.now += 4
    again, later = await cache.rows(FIVE)

    assert rows == again == [{"queue": "q", "jobs": 1}]
    # As old as the moment the count started, half a second before it returned.
    assert (age, later) == (timedelta(seconds=0.5), timedelta(seconds=4.5))
    assert counter.calls == 1


async def test_a_quick_count_is_made_at_every_view() -> None:
    counter = Counter()
    counter.took = INLINE_BELOW / 2
    cache = CountCache(counter.count, counter.clock)

    counted = [(await cache.rows(FIVE))[0] for _ in range(3)]

    assert counted == [[{"queue": "q", "jobs": calls}] for calls in (1, 2, 3)]


async def test_stale_counts_are_served_while_one_recount_runs() -> None:
    counter = Counter()
    cache = CountCache(counter.count, counter.clock)
    await cache.rows(FIVE)
    counter.now += 6
    counter.release = asyncio.Event()

    views = [await cache.rows(FIVE) for _ in range(3)]
    await _settle(cache)

    # Every view got the old counts at once, and only one recount started.
    assert [rows for rows, _ in views] == [[{"queue": "q", "jobs": 1}]] * 3
    assert counter.calls == 2
    counter.release.set()
    await _settle(cache)
    rows, age = await cache.rows(FIVE)
    assert rows == [{"queue": "q", "jobs": 2}]
    assert age == timedelta(seconds=0.5)


async def test_a_slow_count_spaces_the_recounts_by_its_duration() -> None:
    counter = Counter()
    counter.took = 2.0

    cache = CountCache(counter.count, counter.clock)
    await cache.rows(FIVE)

    # Counts are as old as the moment their count started (100.0, on the fake clock).
    counter.now = 100.0 + SPACING * 2.0 - 1
    await cache.rows(FIVE)
    await _settle(cache)
    assert counter.calls == 1
    counter.now = 100.0 + SPACING * 2.0
    await cache.rows(FIVE)
    await _settle(cache)
    assert counter.calls == 2


async def test_a_failed_recount_keeps_the_last_counts_and_is_tried_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    counter = Counter()
    cache = CountCache(counter.count, counter.clock)
    await cache.rows(FIVE)
    counter.fail = True
    counter.now += 6

    with caplog.at_level(logging.WARNING, logger="jobqueue.queues"):
        await cache.rows(FIVE)
        await _settle(cache)
    rows, _ = await cache.rows(FIVE)
    await _settle(cache)

    assert rows == [{"queue": "q", "jobs": 1}]
    assert [record.getMessage() for record in caplog.records] == ["queue recount failed"] * 2
    assert counter.calls == 3
