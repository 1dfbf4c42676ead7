"""The overview page's table: each queue's summary as the rows and links it shows.

Built here rather than in the template so that what a number links to, and how an age
reads, are plain code a unit test reads; the template only lays the values out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Final
from urllib.parse import quote, urlencode

from jobqueue.domain.flow import LimitsSource, limits_in_use, type_rate_text
from jobqueue.domain.queues import QueueSummary
from jobqueue.domain.status import COUNTED, Status
from jobqueue.entrypoints.http.ui.frame import UI_PATH
from jobqueue.entrypoints.http.ui.jobs import JOBS_PATH

# Where a count links to: the jobs browser, listing the queue's jobs of that status.
LISTING_PATH = JOBS_PATH
# A queue's own page (`queues.py`).
QUEUES_PATH = f"{UI_PATH}/queues"
# What sets types' rates apart in the queue page's field: "fax:1/m, send_sms:10/s".
TYPE_RATES_APART: Final = ", "


# How often the overview's table asks for itself again.
REFRESH_SECONDS: Final = 5
# How old the counts a page shows may be: counting every pending job per view would take
# a second on a big table (`adapters/postgres/queue_counts.py`).
COUNTS_MAX_AGE: Final = timedelta(seconds=REFRESH_SECONDS)


@dataclass(frozen=True, slots=True)
class Count:
    status: Status
    value: int
    # The listing of the jobs counted.
    href: str


@dataclass(frozen=True, slots=True)
class QueueRow:
    name: str
    # One per counted status, in `COUNTED`'s order (the table's columns).
    counts: tuple[Count, ...]
    due: int
    scheduled: int
    oldest_due_age: str
    paused: bool
    consumers: int
    unconsumed: bool
    # Its limits with their use now ("3 of 5 running"), "" without; and the limits
    # themselves, as the queue page's form shows them.
    limits_in_use: str = ""
    concurrency: int | None = None
    rate: str | None = None
    key_concurrency: int | None = None
    key_rate: str | None = None
    # "fax:1/m, send_sms:10/s", as the form's field takes them (`queues.py`).
    type_rates: str | None = None

    @property
    def href(self) -> str:
        """The queue's page."""
        return queue_href(self.name)


def queue_href(name: str) -> str:
    # A queue's name is URL-safe by its rule (`fields.QUEUE_NAME`); quoted all the same.
    return f"{QUEUES_PATH}/{quote(name, safe='')}"


def listing_href(status: Status, queue: str) -> str:
    return f"{LISTING_PATH}?{urlencode({'status': status.value, 'queue': queue})}"


def queue_rows(summaries: Sequence[QueueSummary]) -> list[QueueRow]:
    """The table's rows, by queue name."""
    return [_row(summary) for summary in sorted(summaries, key=lambda s: s.state.name)]


def _row(summary: QueueSummary) -> QueueRow:
    state = summary.state
    name, limits = state.name, state.limits
    rate = None if limits.rate is None else str(limits.rate)
    key_rate = None if limits.key_rate is None else str(limits.key_rate)
    started = dict(state.type_started)
    return QueueRow(
        name=name,
        counts=tuple(
            Count(status, summary.counts[status], listing_href(status, name)) for status in COUNTED
        ),
        due=summary.due,
        scheduled=summary.scheduled,
        oldest_due_age="" if summary.oldest_due_age is None else age(summary.oldest_due_age),
        paused=summary.state.paused,
        consumers=summary.consumers,
        unconsumed=summary.unconsumed,
        limits_in_use=limits_in_use(
            limits.concurrency,
            state.running,
            rate,
            state.started,
            limits.key_concurrency,
            key_rate,
            [(each, str(rate), started.get(each)) for each, rate in limits.type_rates],
            declared=state.limits_source is LimitsSource.SETTINGS,
        ),
        concurrency=limits.concurrency,
        rate=rate,
        key_concurrency=limits.key_concurrency,
        key_rate=key_rate,
        type_rates=TYPE_RATES_APART.join(type_rate_text(*each) for each in limits.type_rates)
        or None,
    )


def age(elapsed: timedelta) -> str:
    """How long, as an operator reads it at a glance: its two largest units."""
    seconds = max(0, int(elapsed.total_seconds()))
    units = (("d", 86400), ("h", 3600), ("min", 60), ("s", 1))
    parts: list[str] = []
    for unit, size in units:
        if seconds >= size or (unit == "s" and not parts):
            parts.append(f"{seconds // size} {unit}")
            seconds %= size
        elif parts:
            # The second unit is the next one down, shown even when zero ("2 h 0 min").
            parts.append(f"0 {unit}")
        if len(parts) == 2:
            break
    return " ".join(parts)
