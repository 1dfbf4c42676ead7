"""Jittered exponential backoff between attempts."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

# Beyond this many doublings any positive base exceeds any cap a timedelta can hold, so
# larger exponents are clamped before shifting: attempt 10,000 costs what attempt 200 does.
_MAX_DOUBLINGS = 128


@dataclass(frozen=True, slots=True)
class Backoff:
    """After a retryable failure of attempt n the next attempt waits a delay drawn
    uniformly from [c/2, c], c = min(base * 2**(n-1), cap).

    Half-jitter keeps the growth visible while spreading a burst of failures, so jobs that
    failed together do not all come back in the same instant.
    """

    base: timedelta
    cap: timedelta

    def __post_init__(self) -> None:
        if self.base <= timedelta(0):
            raise ValueError("backoff base must be positive")
        if self.cap < self.base:
            raise ValueError("backoff cap must be at least the base")

    def ceiling(self, attempt: int) -> timedelta:
        """c for attempt n (n >= 1): the largest delay the jitter can pick."""
        if attempt < 1:
            raise ValueError(f"attempt numbers start at 1, got {attempt}")
        base_us = _microseconds(self.base)
        cap_us = _microseconds(self.cap)
        ceiling_us = min(base_us << min(attempt - 1, _MAX_DOUBLINGS), cap_us)
        return timedelta(microseconds=ceiling_us)

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> timedelta:
        """The delay before the attempt after `attempt`; `rand` returns a float in [0, 1)."""
        draw = rand()
        if not 0.0 <= draw <= 1.0:
            raise ValueError(f"rand must return a number in [0, 1], got {draw!r}")
        ceiling_us = _microseconds(self.ceiling(attempt))
        # Whole microseconds throughout: float halves round below c/2 for odd c, and past
        # 2**53 microseconds a float sum can land beyond c (and beyond timedelta.max).
        floor_us = (ceiling_us + 1) // 2
        spread = ceiling_us - floor_us
        return timedelta(microseconds=floor_us + min(spread, int(draw * (spread + 1))))


def _microseconds(value: timedelta) -> int:
    return (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
