"""Periodic jobs: a job type run on a cron schedule, with no scheduler process of its own.

Every worker process schedules every periodic job it knows, and nothing elects a leader:
the job for one slot of the schedule is unique by (name, slot) among jobs of every
status (`slot_unique`), so however many processes insert it, one job exists per slot.
A process inserts a slot's job shortly before the slot (`LEAD`), due at the slot. Slots
that passed while no process ran are not made up for, unless `catch_up` asks for the
last one.

Cron expressions are read by an adapter (`adapters.cron`, a maintained library): the
domain keeps the expression and its time zone, and needs only `Schedule.next_after`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from jobqueue.domain.fields import JsonValue
from jobqueue.domain.status import Status
from jobqueue.domain.unique import Unique

# How long before its slot a slot's job is inserted: enough for a claim to be ready at
# the slot, short enough that a schedule changed by a deploy leaves few jobs behind.
LEAD = timedelta(seconds=5)
# One job per slot for good: a slot that ran (or failed) is not run again.
_EVERY_STATUS = frozenset(Status)


class Schedule(Protocol):
    """A cron expression in its time zone, as an adapter reads it."""

    def next_after(self, moment: datetime) -> datetime:
        """The first slot strictly after `moment` (aware), as an aware datetime."""
        ...

    def latest_before(self, moment: datetime) -> datetime:
        """The last slot strictly before `moment` (aware)."""
        ...


@dataclass(frozen=True, slots=True)
class PeriodicJob:
    """Run jobs of `job_type` with `payload` on `cron` (5 fields, or 6 with seconds first)
    in `timezone`; `name` identifies the schedule (default: the job type)."""

    cron: str
    job_type: str
    payload: JsonValue = field(default_factory=dict)
    timezone: str = "UTC"
    name: str = ""
    # Also run the last slot missed while no worker process ran (once, at start).
    catch_up: bool = False

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.job_type)
        if not isinstance(self.cron, str) or not self.cron.split():
            raise ValueError("a periodic job needs a cron expression")
        # Imported here: importing zoneinfo reads the build's sysconfig, which a bare
        # `import jobqueue` should not pay for.
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"periodic job {self.name!r}: unknown time zone {self.timezone!r}"
            ) from None

    def slot_unique(self, slot: datetime) -> Unique:
        """What makes the job of `slot` one of a kind, across every process."""
        return Unique(key=f"periodic:{self.name}:{slot.isoformat()}", states=_EVERY_STATUS)
