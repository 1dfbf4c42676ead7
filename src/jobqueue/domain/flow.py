"""Flow control: a queue's limits, across every process that claims from it.

- concurrency: at most so many of the queue's jobs running at once (claimed and not yet
  ended, whichever process holds them);
- rate: at most so many starts within any window of a period (`Rate`), on the database's
  clock;
- key concurrency: at most so many running jobs of one partition key (`partition.py`),
  claims rotating between keys;
- key rate: at most so many starts of one partition key within any window of a period;
- type rates: at most so many starts of one job type within any window of its period,
  named type by type (`type_rate=send_sms:10/s`), the queue's other types unpaced.

Limits are kept with the queue (`queues` row) and enforced by the claim statement itself,
so a change holds from the claim after its commit on, in every process. A job held back
by a limit stays pending, its attempts untouched, and is claimed once the limit allows.
Who set them is kept too (`LimitsSource`): an operator's change holds until an operator
clears it; limits declared in settings apply to a queue no operator has set.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

from jobqueue.domain.durations import parse_duration
from jobqueue.domain.fields import MAX_TYPE_LENGTH
from jobqueue.domain.job import Job

# Bounds that keep the claim's bookkeeping small: the queue's row holds a lease per
# running job and a time per start in the window.
MAX_CONCURRENCY = 10_000
MAX_RATE = 10_000
MIN_PERIOD = timedelta(milliseconds=100)
MAX_PERIOD = timedelta(days=1)
# A claim takes the turn of each rated type it reads: a handful, not hundreds.
MAX_TYPE_RATES = 50


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
# A type's rate, as `type_rate=TYPE:N/PERIOD`, given once per type.
TYPE_RATE = "type_rate"

# Rates per job type, by type, in type order.
TypeRates = tuple[tuple[str, Rate], ...]


def type_rates(
    rates: Mapping[str, str | Rate] | Iterable[tuple[str, str | Rate]],
) -> TypeRates:
    """`rates` (each a `Rate` or its text, "10/s") as `QueueLimits.type_rates` holds
    them; raises `ValueError` for too many, a type named twice or badly, or a bad rate
    (naming its type)."""
    pairs = list(rates.items()) if isinstance(rates, Mapping) else list(rates)
    # Counted first: a request may name any number of them, and the checks below compare
    # each name with every other.
    _check_type_rate_count(len(pairs))
    names = [name for name, _ in pairs]
    for name in names:
        # No NUL: no job type holds one (the database's text cannot).
        if not name.strip() or len(name) > MAX_TYPE_LENGTH or "\x00" in name:
            raise ValueError(
                f"a type rate names a job type (1 to {MAX_TYPE_LENGTH} characters, without "
                f"NUL), got {name!r}"
            )
        if names.count(name) > 1:
            raise ValueError(f"the rate of type {name!r} is given twice")
    return tuple(sorted((_type_rate_of(name, rate) for name, rate in pairs), key=_by_type))


def parse_type_rates(entries: Sequence[str]) -> TypeRates:
    """`["send_sms:10/s", "fax:1/m"]`: each a job type and its rate, as settings, the CLI
    and the dashboard write them."""
    _check_type_rate_count(len(entries))
    return type_rates(parse_type_rate(entry) for entry in entries)


def parse_type_rate(text: str) -> tuple[str, str]:
    """`send_sms:10/s`: a job type (spaces around it ignored) and its rate's text."""
    name, colon, rate = text.rpartition(":")
    if not colon or not name:
        raise ValueError(f"a type rate is TYPE:STARTS/PERIOD, such as send_sms:10/s; got {text!r}")
    return name.strip(), rate


def _check_type_rate_count(count: int) -> None:
    if count > MAX_TYPE_RATES:
        raise ValueError(f"at most {MAX_TYPE_RATES} types of a queue have rates, got {count}")


def _by_type(pair: tuple[str, Rate]) -> str:
    return pair[0]


def type_rate_text(name: str, rate: Rate) -> str:
    """A type's rate as `parse_type_rate` reads it: `send_sms:10/s`."""
    return f"{name}:{rate}"


def _type_rate_of(name: str, rate: str | Rate) -> tuple[str, Rate]:
    """A job type and its rate, given as a `Rate` or as text ("10/s"); a refusal names
    the type, as a queue's rates of several types would leave it unsaid which one."""
    if isinstance(rate, Rate):
        return name, rate
    try:
        return name, Rate.parse(rate)
    except ValueError as error:
        raise ValueError(f"type {name!r}: {error}") from None


@dataclass(frozen=True, slots=True)
class QueueLimits:
    """A queue's limits; None: no such limit."""

    concurrency: int | None = None
    rate: Rate | None = None
    key_concurrency: int | None = None
    key_rate: Rate | None = None
    # The rates of some of its job types (`type_rates()`); its other types are unpaced.
    type_rates: TypeRates = ()

    def __post_init__(self) -> None:
        for name in _COUNTS:
            value = getattr(self, name)
            if value is not None and not 1 <= value <= MAX_CONCURRENCY:
                raise ValueError(
                    f"a {name.replace('_', ' ')} limit must be between 1 and "
                    f"{MAX_CONCURRENCY}, got {value}"
                )
        if type_rates(self.type_rates) != self.type_rates:
            raise ValueError("type rates must be given in type order; use type_rates()")
        if self.type_rates and self.keyed:
            # A keyed claim picks jobs key by key; a type's budget would have to be shared
            # across every key it visits. Not built: give such a type a queue of its own.
            raise ValueError(
                "rates per job type cannot be combined with limits per partition key in one "
                "queue; give the rated type a queue of its own"
            )

    @property
    def any(self) -> bool:
        return bool(self.type_rates) or any(getattr(self, name) is not None for name in _NAMES)

    def type_rate(self, job_type: str) -> Rate | None:
        return dict(self.type_rates).get(job_type)

    @property
    def keyed(self) -> bool:
        """Whether the queue has limits per partition key."""
        return self.key_concurrency is not None or self.key_rate is not None

    @classmethod
    def parse(cls, text: str) -> QueueLimits:
        """`concurrency=5 rate=100/1m key_concurrency=2 key_rate=10/1m
        type_rate=send_sms:10/s`: each limit as name=value, apart by spaces; `type_rate`
        once per rated type."""
        given: dict[str, str] = {}
        rated: list[str] = []
        for part in text.split():
            name, equals, value = part.partition("=")
            if equals and name == TYPE_RATE:
                rated.append(value)
                continue
            if not equals or name not in _NAMES:
                raise ValueError(
                    f"{part!r}: a limit is concurrency=N, rate=N/PERIOD, key_concurrency=N,"
                    " key_rate=N/PERIOD or type_rate=TYPE:N/PERIOD, as in"
                    " 'concurrency=5 rate=100/1m'"
                )
            if name in given:
                raise ValueError(f"{name} is given twice")
            given[name] = value
        if not given and not rated:
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
            type_rates=parse_type_rates(rated),
        )

    def __str__(self) -> str:
        parts = [
            f"{name}={getattr(self, name)}" for name in _NAMES if getattr(self, name) is not None
        ]
        parts += [f"{TYPE_RATE}={type_rate_text(name, rate)}" for name, rate in self.type_rates]
        return " ".join(parts) or "none"


NO_LIMITS = QueueLimits()


def limits_in_use(
    concurrency: int | None,
    running: int | None,
    rate: str | None,
    started: int | None,
    key_concurrency: int | None = None,
    key_rate: str | None = None,
    type_rates: Iterable[tuple[str, str, int | None]] = (),
    *,
    declared: bool = False,
) -> str:
    """A queue's limits with their use, as people read them ("3 of 5 running, 40 of 100/m
    started, 2 running per key, 10/m started per key, 4 of 10/s send_sms started"); ""
    without limits. `type_rates`: each rated type, its rate and its starts in the window
    now. `declared`: set by QUEUE_LIMITS, not an operator."""
    parts = []
    if concurrency is not None:
        parts.append(f"{running} of {concurrency} running")
    if rate is not None:
        parts.append(f"{started} of {rate} started")
    if key_concurrency is not None:
        parts.append(f"{key_concurrency} running per key")
    if key_rate is not None:
        parts.append(f"{key_rate} started per key")
    for name, rate_text, type_started in type_rates:
        parts.append(f"{type_started or 0} of {rate_text} {name} started")
    if parts and declared:
        parts.append("(QUEUE_LIMITS)")
    return ", ".join(parts)


class Limit(enum.StrEnum):
    """A limit that held a claim back (the metric's label)."""

    CONCURRENCY = "concurrency"
    RATE = "rate"
    KEY_CONCURRENCY = "key_concurrency"
    KEY_RATE = "key_rate"
    TYPE_RATE = "type_rate"


@dataclass(frozen=True, slots=True)
class Headroom:
    """What a queue's limits had left when a claim was made: None for a limit the queue
    does not have; `rate_opens_in`: how long until the rate's window lets one more
    start, counted from the claim; `keys_full`: how many of the keys it visited had no
    free slot (None: no per-key limit), `keys_rate_spent` how many of those for their
    key rate, the soonest of whose windows lets one more start in `key_rate_opens_in`;
    `types_rate_spent`: how many rated types the claim read had no start left when it
    was done (None: no type rates), the soonest to let one more in `type_rate_opens_in`."""

    concurrency: int | None = None
    rate: int | None = None
    rate_opens_in: timedelta | None = None
    keys_full: int | None = None
    keys_rate_spent: int | None = None
    key_rate_opens_in: timedelta | None = None
    types_rate_spent: int | None = None
    type_rate_opens_in: timedelta | None = None


class Claimed(list[Job]):
    """The jobs a claim took, in the order to start them, and what held it back: the
    limits that let it take fewer than it asked for (`held_back`); when the queue's rate
    was one, how long until it lets the queue start more (`retry_in`), and when the rate
    of a key or a type was, until the first of those may start more (`windows_open_in`:
    other keys' or types' jobs may come sooner)."""

    def __init__(
        self,
        jobs: list[Job] | tuple[Job, ...] = (),
        *,
        held_back: frozenset[Limit] = frozenset(),
        retry_in: timedelta | None = None,
        windows_open_in: timedelta | None = None,
    ) -> None:
        super().__init__(jobs)
        self.held_back = held_back
        self.retry_in = retry_in
        self.windows_open_in = windows_open_in

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
        opens: list[timedelta | None] = []
        if took < asked and by_rate:
            held.add(Limit.KEY_RATE)
            opens.append(headroom.key_rate_opens_in)
        if took < asked and headroom.types_rate_spent:
            held.add(Limit.TYPE_RATE)
            opens.append(headroom.type_rate_opens_in)
        retry_in = headroom.rate_opens_in if rate_spent else None
        return cls(
            jobs,
            held_back=frozenset(held),
            retry_in=retry_in,
            windows_open_in=min((each for each in opens if each is not None), default=None),
        )


def _duration_text(period: timedelta) -> str:
    seconds = period.total_seconds()
    for unit, size in (("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return unit if count == 1 else f"{count}{unit}"
    return f"{round(seconds * 1000)}ms"
