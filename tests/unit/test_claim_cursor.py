"""Where the next claim starts: after the last job claimed, back at the start when a
claim comes back short or the rescan interval has passed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

from jobqueue.adapters.postgres.claim_cursor import START, ClaimCursor
from jobqueue.domain.job import Job, NewJob

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def job(seconds: int, id_: int) -> Job:
    return NewJob(type="t", max_attempts=1).stored(UUID(int=id_), T0 + timedelta(seconds=seconds))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_full_claim_moves_the_cursor_past_its_greatest_key() -> None:
    cursor = ClaimCursor(clock=Clock())
    assert cursor.after() == START
    cursor.claimed([job(2, 1), job(1, 9), job(2, 3)], limit=3)
    assert cursor.after() == (T0 + timedelta(seconds=2), UUID(int=3))


def test_a_short_claim_sends_the_next_one_back_to_the_start() -> None:
    cursor = ClaimCursor(clock=Clock())
    cursor.claimed([job(1, 1), job(2, 2)], limit=2)
    cursor.claimed([job(3, 3)], limit=2)
    assert cursor.after() == START


def test_the_cursor_goes_back_to_the_start_at_least_every_rescan_interval() -> None:
    clock = Clock()
    cursor = ClaimCursor(rescan=1.0, clock=clock)
    cursor.claimed([job(1, 1)], limit=1)
    clock.now += 0.5
    assert cursor.after() != START
    cursor.claimed([job(2, 2)], limit=1)
    clock.now += 0.6
    assert cursor.after() == START
    cursor.claimed([job(3, 3)], limit=1)
    clock.now += 0.5
    assert cursor.after() == (T0 + timedelta(seconds=3), UUID(int=3))
