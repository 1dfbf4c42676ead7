"""Flow control: a queue's limits, across every process that claims from it.

- concurrency: at most so many of the queue's jobs running at once (claimed and not yet
  ended, whichever process holds them);
- rate: at most so many starts within any window of a period (`Rate`), on the database's
  clock;
- key concurrency: at most so many running jobs of one partition key (`partition.py`),
  claims rotating between keys;
- key rate: at most so many starts of one partition key within any window of a period.

Limits are kept with the queue (`queues` row) and enforced by the claim statement itself,
so a change holds from the claim after its commit on, in every process. A job held back
by a limit stays pending, its attempts untouched, and is claimed once the limit allows.
Who set them is kept too (`LimitsSource`): an operator's change holds until an operator
clears it; limits declared in settings apply to a queue no operator has set.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from datetime import timedelta

from jobqueue.domain.durations import parse_duration
from jobqueue.domain.job import Job

# Bounds that keep the claim's bookkeeping small: the queue's row holds a lease per
# running job and a time per start in the window.
MAX_CONCURRENCY = 10_000
MAX_RATE = 10_000
MIN_PERIOD = timedelta(milliseconds=100)
MAX_PERIOD = timedelta(days=1)


class LimitsSource(enum.StrEnum):
    SETTINGS = "settings"
    OPERATOR = "operator"


@dataclass(frozen=True, slots=True)
class Rate:
    """At most `limit` starts within any `period`."""

    limit: int
    period: timedelta

    def __post_init__(self) -> None:
        if not 1 <= self.limit <= MAX_RATE:
            raise ValueError(f"a rate limit must be between 1 and {MAX_RATE}, got {self.limit}")
        if not MIN_PERIOD <= self.period <= MAX_PERIOD:
            raise ValueError(
                f"a rate's period must be between {_duration_text(MIN_PERIOD)} and "
                f"{_duration_text(MAX_PERIOD)}, got {_duration_text(self.period)}"
            )

    @classmethod
    def parse(cls, text: str) -> Rate:
        """`100/1m`, `20/s`, `5/500ms`: starts per period (a duration; a bare unit is one
        of it)."""
        match = re.fullmatch(r"\s*(\d+)\s*/\s*(\S+)\s*", text)
        if match is None:
            raise ValueError(f"a rate is starts per period, such as 100/1m or 20/s; got {text!r}")
        count, period = match.groups()
        return cls(int(count), parse_duration(f"1{period}" if period[0].isalpha() else period))

    def __str__(self) -> str:
        return f"{self.limit}/{_duration_text(self.period)}"


# Each limit's name, as settings, the API and the CLI spell it; those that are counts,
# and those that are rates.
_NAMES = ("concurrency", "rate", "key_concurrency", "key_rate")
_COUNTS = ("concurrency", "key_concurrency")
_RATES = ("rate", "key_rate")


@dataclass(frozen=True, slots=True)
class QueueLimits:
    """A queue's limits; None: no such limit."""

    concurrency: int | None = None
    rate: Rate | None = None
    key_concurrency: int | None = None
    key_rate: Rate | None = None

    def __post_init__(self) -> None:
        for name in _COUNTS:
            value = getattr(self, name)
            if value is not None and not 1 <= value <= MAX_CONCURRENCY:
                raise ValueError(
                    f"a {name.replace('_', ' ')} limit must be between 1 and "
                    f"{MAX_CONCURRENCY}, got {value}"
                )

    @property
    def any(self) -> bool:
        return any(getattr(self, name) is not None for name in _NAMES)

    @property
    def keyed(self) -> bool:
        """Whether the queue has limits per partition key."""
        return self.key_concurrency is not None or self.key_rate is not None

    @classmethod
    def parse(cls, text: str) -> QueueLimits:
        """`concurrency=5 rate=100/1m key_concurrency=2 key_rate=10/1m`: each limit as
        name=value, apart by spaces."""
        given: dict[str, str] = {}
        for part in text.split():
            name, equals, value = part.partition("=")
            if not equals or name not in _NAMES:
                raise ValueError(
                    f"{part!r}: a limit is concurrency=N, rate=N/PERIOD, key_concurrency=N"
                    " or key_rate=N/PERIOD, as in 'concurrency=5 rate=100/1m'"
                )
            if name in given:
                raise ValueError(f"{name} is given twice")
            given[name] = value
        if not given:
            raise ValueError("no limit given; use a form such as 'concurrency=5 rate=100/1m'")
        counts: dict[str, int | None] = {}
        for name in _COUNTS:
            count = given.get(name)
            if count is not None and not count.isdigit():
                raise ValueError(f"{name} must be a whole number, got {count!r}")
            counts[name] = None if count is None else int(count)
        rates = {name: Rate.parse(given[name]) for name in _RATES if name in given}
        return cls(
            concurrency=counts["concurrency"],
            rate=rates.get("rate"),
            key_concurrency=counts["key_concurrency"],
            key_rate=rates.get("key_rate"),
        )

    def __str__(self) -> str:
        parts = [
            f"{name}={getattr(self, name)}" for name in _NAMES if getattr(self, name) is not None
        ]
        return " ".join(parts) or "none"


NO_LIMITS = QueueLimits()


def limits_in_use(
    concurrency: int | None,
    running: int | None,
    rate: str | None,
    started: int | None,
    key_concurrency: int | None = None,
    key_rate: str | None = None,
    *,
    declared: bool = False,
) -> str:
    """A queue's limits with their use, as people read them ("3 of 5 running, 40 of 100/m
    started, 2 running per key, 10/m started per key"); "" without limits. `declared`: set by
    QUEUE_LIMITS, not an operator."""
    parts = []
    if concurrency is not None:
        parts.append(f"{running} of {concurrency} running")
    if rate is not None:
        parts.append(f"{started} of {rate} started")
    if key_concurrency is not None:
        parts.append(f"{key_concurrency} running per key")
    if key_rate is not None:
        parts.append(f"{key_rate} started per key")
    if parts and declared:
        parts.append("(QUEUE_LIMITS)")
    return ", ".join(parts)


class Limit(enum.StrEnum):
    """A limit that held a claim back (the metric's label)."""

    CONCURRENCY = "concurrency"
    RATE = "rate"
    KEY_CONCURRENCY = "key_concurrency"
    KEY_RATE = "key_rate"


@dataclass(frozen=True, slots=True)
class Headroom:
    """What a queue's limits had left when a claim was made: None for a limit the queue
    does not have; `rate_opens_in`: how long until the rate's window lets one more
    start, counted from the claim; `keys_full`: how many of the keys it visited had no
    free slot (None: no per-key limit), `keys_rate_spent` how many of those for their
    key rate, the soonest of whose windows lets one more start in `key_rate_opens_in`."""

    concurrency: int | None = None
    rate: int | None = None
    rate_opens_in: timedelta | None = None
    keys_full: int | None = None
    keys_rate_spent: int | None = None
    key_rate_opens_in: timedelta | None = None


class Claimed(list[Job]):
    """The jobs a claim took, in the order to start them, and what held it back: the
    limits that let it take fewer than it asked for (`held_back`); when the queue's rate
    was one, how long until it lets the queue start more (`retry_in`), and when a key's
    rate was, until the first of those keys may start more (`keys_open_in`: other keys'
    jobs may come sooner)."""

    def __init__(
        self,
        jobs: list[Job] | tuple[Job, ...] = (),
        *,
        held_back: frozenset[Limit] = frozenset(),
        retry_in: timedelta | None = None,
        keys_open_in: timedelta | None = None,
    ) -> None:
        super().__init__(jobs)
        self.held_back = held_back
        self.retry_in = retry_in
        self.keys_open_in = keys_open_in

    @classmethod
    def within(cls, jobs: list[Job], asked: int, headroom: Headroom) -> Claimed:
        """`jobs`, taken by a claim for `asked` jobs under `headroom`."""
        took = len(jobs)
        held: set[Limit] = set()
        if took < asked and headroom.concurrency is not None and took >= headroom.concurrency:
            held.add(Limit.CONCURRENCY)
        rate_spent = headroom.rate is not None and took >= headroom.rate
        if took < asked and rate_spent:
            held.add(Limit.RATE)
        by_rate = headroom.keys_rate_spent or 0
        if took < asked and (headroom.keys_full or 0) > by_rate:
            held.add(Limit.KEY_CONCURRENCY)
        keys_open_in = None
        if took < asked and by_rate:
            held.add(Limit.KEY_RATE)
            keys_open_in = headroom.key_rate_opens_in
        retry_in = headroom.rate_opens_in if rate_spent else None
        return cls(jobs, held_back=frozenset(held), retry_in=retry_in, keys_open_in=keys_open_in)


def _duration_text(period: timedelta) -> str:
    seconds = period.total_seconds()
    for unit, size in (("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return unit if count == 1 else f"{count}{unit}"
    return f"{round(seconds * 1000)}ms"
