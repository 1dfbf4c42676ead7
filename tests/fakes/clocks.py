"""Clocks for the fakes: one that moves only when told to, and the wall clock."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

Clock = Callable[[], datetime]


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self, start: datetime = datetime(2030, 1, 1, tzinfo=UTC)) -> None:
        self._now = start

    def __call__(self) -> datetime:
        return self._now

    def advance(self, by: timedelta) -> None:
        self._now += by


def wall_clock() -> datetime:
    return datetime.now(UTC)
