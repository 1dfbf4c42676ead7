"""Throughput and pickup latency as the dashboard charts them, from a small rollup.

Each worker process counts, in memory, what its attempts came to and how long each job
waited for a worker, per queue (`Tallies`), and adds its counts to the store's rollup
every few seconds: a row per (minute, queue). A chart then reads at most a day of those
rows and never counts the jobs table.

Latency is kept as a count, a sum and a few fixed buckets rather than every value: a
row stays a fixed size however many jobs it counts, concurrent writers merge by plain
addition, and a p50 or p95 read from the buckets is within a bucket of the truth (the
bounds are a factor of 4 to 6 apart), enough for a line an operator reads at a glance.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from jobqueue.domain.attempts import Outcome

# The upper bounds of the pickup latency buckets, in milliseconds; a last bucket counts
# what waited longer than the last bound. From a claim's round trip to a backlog's hour.
PICKUP_BOUNDS_MS: tuple[int, ...] = (
    10, 50, 250, 1_000, 5_000, 30_000, 120_000, 600_000, 3_600_000,
)  # fmt: skip
_BOUNDS_SECONDS = tuple(bound / 1000 for bound in PICKUP_BOUNDS_MS)
BUCKETS = len(PICKUP_BOUNDS_MS) + 1

# How long the rollup keeps its rows: the longest chart (a day) with room to spare.
ROLLUP_KEPT = timedelta(days=2)


def bucket_of(seconds: float) -> int:
    """The index of the bucket a latency of `seconds` falls in (its bound included)."""
    return bisect_left(_BOUNDS_SECONDS, seconds)


@dataclass(slots=True)
class RollupCounts:
    """One queue's counts since the last flush (mutable: counted in place)."""

    completed: int = 0
    failed: int = 0
    retried: int = 0
    # Attempts started, with the total and the buckets of how long their jobs waited.
    picked: int = 0
    pickup_seconds: float = 0.0
    pickup_buckets: list[int] = field(default_factory=lambda: [0] * BUCKETS)

    def add(self, other: RollupCounts) -> None:
        self.completed += other.completed
        self.failed += other.failed
        self.retried += other.retried
        self.picked += other.picked
        self.pickup_seconds += other.pickup_seconds
        for index, count in enumerate(other.pickup_buckets):
            self.pickup_buckets[index] += count


class Tallies:
    """A process's counts per queue since they were last taken: the in-memory half of
    the rollup. Counting is a dict lookup and an addition, cheap enough for every
    attempt; the store sees the counts only when they are taken and flushed."""

    def __init__(self) -> None:
        self._by_queue: dict[str, RollupCounts] = {}

    def _of(self, queue: str) -> RollupCounts:
        found = self._by_queue.get(queue)
        if found is None:
            found = self._by_queue[queue] = RollupCounts()
        return found

    def picked_up(self, queue: str, waited: timedelta) -> None:
        seconds = waited.total_seconds()
        tally = self._of(queue)
        tally.picked += 1
        tally.pickup_seconds += seconds
        tally.pickup_buckets[bucket_of(seconds)] += 1

    def ended(self, queue: str, outcome: Outcome) -> None:
        """Count an attempt's recorded outcome. A dead letter is a failure as the operator
        sees it; a release or a snooze gives the attempt back and counts nowhere."""
        if outcome is Outcome.COMPLETED:
            self._of(queue).completed += 1
        elif outcome is Outcome.FAILED or outcome is Outcome.DEAD_LETTER:
            self._of(queue).failed += 1
        elif outcome is Outcome.RETRIED:
            self._of(queue).retried += 1

    def take(self) -> dict[str, RollupCounts]:
        """Every count so far, by queue; counting starts again from nothing."""
        taken, self._by_queue = self._by_queue, {}
        return taken

    def give_back(self, taken: Mapping[str, RollupCounts]) -> None:
        """Counts `take` returned that could not be written: they join the next flush."""
        for queue, tally in taken.items():
            self._of(queue).add(tally)


@dataclass(frozen=True, slots=True)
class Window:
    """A chart's span: `points` slots of `step` each, the last one holding now."""

    name: str
    step: timedelta
    points: int

    @property
    def span(self) -> timedelta:
        return self.step * self.points


LAST_HOUR = Window("hour", timedelta(minutes=1), 60)
LAST_DAY = Window("day", timedelta(minutes=15), 96)
WINDOWS = (LAST_HOUR, LAST_DAY)


@dataclass(frozen=True, slots=True)
class Slot:
    """One point of a chart: what every counted queue (or one) did from `at` for a
    window's step."""

    at: datetime
    completed: int = 0
    failed: int = 0
    retried: int = 0
    picked: int = 0
    pickup_seconds: float = 0.0
    pickup_buckets: tuple[int, ...] = (0,) * BUCKETS

    def pickup_quantile(self, q: float) -> float | None:
        """The `q` quantile of the slot's pickup latencies in seconds, from its buckets
        (None without any). Within a bucket values are taken as spread evenly on a log
        scale (linearly in the first, which starts at 0); past the last bound, the
        bound is all that is known, and is what is returned."""
        return quantile(self.pickup_buckets, q)


def quantile(buckets: Sequence[int], q: float) -> float | None:
    """The `q` quantile (0 < q ≤ 1), in seconds, of latencies counted in `buckets`."""
    total = sum(buckets)
    if total == 0:
        return None
    rank = q * total
    seen = 0
    for index, count in enumerate(buckets):
        if count and seen + count >= rank:
            if index == len(_BOUNDS_SECONDS):
                return _BOUNDS_SECONDS[-1]
            upper = _BOUNDS_SECONDS[index]
            share = (rank - seen) / count
            if index == 0:
                return upper * share
            lower = _BOUNDS_SECONDS[index - 1]
            return lower * math.pow(upper / lower, share)
        seen += count
    return _BOUNDS_SECONDS[-1]
