"""Where the next claim of a queue starts: in each (priority, type) range, after the last
job claimed there; back at the start when a claim comes back short or the rescan interval
has passed; and each claim one type further on."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest

from jobqueue.adapters.postgres.claim_cursor import START, ClaimCursor
from jobqueue.domain.claims import claim_ranges
from jobqueue.domain.fields import PRIORITIES
from jobqueue.domain.job import Job, NewJob

T0 = datetime(2030, 1, 1, tzinfo=UTC)
TYPES = ("a", "b")


def job(seconds: int, id_: int, priority: int = 0, job_type: str = "a") -> Job:
    new = replace(NewJob(type=job_type, max_attempts=1), priority=priority)
    return new.stored(UUID(int=id_), T0 + timedelta(seconds=seconds))


def key(seconds: int, id_: int) -> tuple[datetime, UUID]:
    return T0 + timedelta(seconds=seconds), UUID(int=id_)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def after(cursor: ClaimCursor) -> dict[tuple[int, str], tuple[datetime, UUID]]:
    ranges = cursor.next(TYPES)
    return dict(zip(ranges.ranges, ranges.after, strict=True))


def test_each_claim_reads_every_priority_in_order_and_the_types_in_turn() -> None:
    assert claim_ranges(["b", "a", "c"], 0)[:3] == [(0, "a"), (0, "b"), (0, "c")]
    assert claim_ranges(["b", "a", "c"], 1)[:3] == [(0, "b"), (0, "c"), (0, "a")]
    assert claim_ranges(["b", "a", "c"], 5)[3:6] == [(1, "c"), (1, "a"), (1, "b")]
    assert [priority for priority, _ in claim_ranges(["a"], 0)] == list(PRIORITIES)
    with pytest.raises(ValueError, match="types"):
        claim_ranges([], 0)

    cursor = ClaimCursor(clock=Clock())
    assert [cursor.next(TYPES).ranges[0] for _ in range(3)] == [(0, "a"), (0, "b"), (0, "a")]


def test_a_full_claim_moves_each_range_past_its_greatest_key() -> None:
    cursor = ClaimCursor(clock=Clock())
    assert cursor.next(TYPES).at_start

    # In claim order, as the store hands them over.
    claimed = [job(1, 9), job(2, 1), job(2, 3, job_type="b"), job(5, 4, priority=3)]
    cursor.claimed(claimed, limit=4)

    keys = after(cursor)
    assert keys[0, "a"] == key(2, 1)
    assert keys[0, "b"] == key(2, 3)
    assert keys[3, "a"] == key(5, 4)
    # A range the claim took nothing from is read from its start.
    moved = {(0, "a"), (0, "b"), (3, "a")}
    assert {keys[each] for each in keys if each not in moved} == {START}


def test_a_later_claim_moves_only_the_ranges_it_took_from() -> None:
    cursor = ClaimCursor(clock=Clock())
    cursor.claimed([job(1, 1), job(2, 2, priority=9)], limit=2)
    cursor.claimed([job(3, 3)], limit=1)
    keys = after(cursor)
    assert keys[0, "a"] == key(3, 3)
    assert keys[9, "a"] == key(2, 2)


def test_a_short_claim_sends_the_next_one_back_to_the_start() -> None:
    cursor = ClaimCursor(clock=Clock())
    cursor.claimed([job(1, 1), job(2, 2, priority=4)], limit=2)
    cursor.claimed([job(3, 3)], limit=2)
    assert cursor.next(TYPES).at_start


def test_the_cursor_goes_back_to_the_start_at_least_every_rescan_interval() -> None:
    clock = Clock()
    cursor = ClaimCursor(rescan=1.0, clock=clock)
    cursor.claimed([job(1, 1)], limit=1)
    clock.now += 0.5
    assert not cursor.next(TYPES).at_start
    cursor.claimed([job(2, 2)], limit=1)
    clock.now += 0.6
    assert cursor.next(TYPES).at_start
    cursor.claimed([job(3, 3)], limit=1)
    clock.now += 0.5
    assert after(cursor)[0, "a"] == key(3, 3)
