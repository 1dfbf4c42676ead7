"""Where the next claim of a queue starts: in each priority's range, after the last job
claimed there; back at the start when a claim comes back short or the rescan interval
has passed."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from uuid import UUID

from jobqueue.adapters.postgres.claim_cursor import FROM_START, START, ClaimCursor
from jobqueue.domain.job import PRIORITIES, Job, NewJob

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def job(seconds: int, id_: int, priority: int = 0) -> Job:
    new = replace(NewJob(type="t", max_attempts=1), priority=priority)
    return new.stored(UUID(int=id_), T0 + timedelta(seconds=seconds))


def key(seconds: int, id_: int) -> tuple[datetime, UUID]:
    return T0 + timedelta(seconds=seconds), UUID(int=id_)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_full_claim_moves_each_priority_s_range_past_its_greatest_key() -> None:
    cursor = ClaimCursor(clock=Clock())
    assert cursor.after() == FROM_START
    assert len(FROM_START) == len(PRIORITIES)

    # In claim order, as the store hands them over.
    cursor.claimed([job(1, 9), job(2, 1), job(2, 3), job(5, 4, priority=3)], limit=4)

    after = cursor.after()
    assert after[0] == key(2, 3)
    assert after[3] == key(5, 4)
    # A priority the claim took nothing from is read from its start.
    assert [after[p] for p in PRIORITIES if p not in (0, 3)] == [START] * (len(PRIORITIES) - 2)


def test_a_later_claim_moves_only_the_ranges_it_took_from() -> None:
    cursor = ClaimCursor(clock=Clock())
    cursor.claimed([job(1, 1), job(2, 2, priority=9)], limit=2)
    cursor.claimed([job(3, 3)], limit=1)
    assert cursor.after()[0] == key(3, 3)
    assert cursor.after()[9] == key(2, 2)


def test_a_short_claim_sends_the_next_one_back_to_the_start() -> None:
    cursor = ClaimCursor(clock=Clock())
    cursor.claimed([job(1, 1), job(2, 2, priority=4)], limit=2)
    cursor.claimed([job(3, 3)], limit=2)
    assert cursor.after() == FROM_START


def test_the_cursor_goes_back_to_the_start_at_least_every_rescan_interval() -> None:
    clock = Clock()
    cursor = ClaimCursor(rescan=1.0, clock=clock)
    cursor.claimed([job(1, 1)], limit=1)
    clock.now += 0.5
    assert cursor.after() != FROM_START
    cursor.claimed([job(2, 2)], limit=1)
    clock.now += 0.6
    assert cursor.after() == FROM_START
    cursor.claimed([job(3, 3)], limit=1)
    clock.now += 0.5
    assert cursor.after()[0] == key(3, 3)
