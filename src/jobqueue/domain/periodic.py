"""Periodic jobs: a job type run on a cron schedule, with no scheduler process of its own.

Every worker process schedules every periodic job it knows, and nothing elects a leader.
The store keeps each schedule's last slot, and inserts a slot's job only in the
statement that moves the last slot forward to it (`PeriodicSlots`): however many
processes insert a slot, and whatever retention has deleted since, a slot runs at most
once, ever. A process inserts a slot's job shortly before the slot (`LEAD`), due at the
slot.

A process that falls behind (stalled, or its clock jumped ahead) never inserts the
slots it missed one after another: it inserts at most one, the latest due
(`slot_to_insert`), and that one only while it is at most `GRACE` late, or when the
schedule asks to `catch_up`. Slots that passed while no process ran are not made up
for, unless `catch_up` asks for the latest one (once, and only for a schedule that ran
before).

Cron expressions are read by an adapter (`adapters.cron`, a maintained library): the
domain keeps the expression and its time zone, and needs only a `Schedule`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol
from uuid import UUID

from jobqueue.domain.fields import JsonValue

# How long before its slot a slot's job is inserted: enough for a claim to be ready at
# the slot, short enough that a schedule changed by a deploy leaves few jobs behind.
LEAD = timedelta(seconds=5)
# How late a slot's job may still be inserted without `catch_up`: a scheduler woken a
# little late (a busy event loop, a store that failed for a while) still runs its slot.
GRACE = timedelta(minutes=1)


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
    # Also run the latest slot missed while no worker process ran (once, at start, for a
    # schedule that ran before) or while this one was stalled.
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


def slot_to_insert(
    schedule: Schedule, slot: datetime, now: datetime, *, catch_up: bool
) -> datetime | None:
    """The slot a scheduler inserts when it wakes at `now` for `slot`: that slot; or, when
    it fell behind (the slot after it has passed too), only the latest slot that passed
    (one, never a burst). None when the slot chosen is more than `GRACE` late and the
    schedule does not `catch_up`: it was missed."""
    if schedule.next_after(slot) <= now:
        slot = schedule.latest_before(now)
    if slot < now - GRACE and not catch_up:
        return None
    return slot


def following(schedule: Schedule, slot: datetime, now: datetime) -> datetime:
    """The slot a scheduler waits for after `slot`: the next one, and never one that
    passed already (after a stall, those are `slot_to_insert`'s to collapse)."""
    return schedule.next_after(max(slot, now))


@dataclass(frozen=True, slots=True)
class LastSlot:
    """The latest slot of a schedule whose job was inserted, and that job while it exists:
    None once retention deleted it, or when another job held its unique key."""

    slot: datetime
    job_id: UUID | None


def next_slots(
    entries: Sequence[tuple[PeriodicJob, Schedule]], now: datetime
) -> list[tuple[PeriodicJob, datetime]]:
    """Each periodic job with its next slot after `now`."""
    return [(periodic, schedule.next_after(now)) for periodic, schedule in entries]
