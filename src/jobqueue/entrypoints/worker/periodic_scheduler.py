"""The periodic jobs of a worker process: each slot's job inserted shortly before the slot,
by every process, with no leader (`domain/periodic.py` says why a slot runs at most once).

Slots are computed from this process's clock and inserted due at the slot, so the claim
(on the database's clock) starts them. The store inserts a slot's job only when the slot
is after its schedule's last one, so a process whose clock runs a little behind, or that
restarts, or that finds the slot's job deleted by retention, inserts nothing. At the slot
the process wakes its own pools, so the job starts then rather than at the next poll. A
store that fails is tried again every `RETRY_SECONDS` until the slot is `GRACE` late,
then the slot is let go (logged).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from jobqueue.domain.errors import JobQueueError
from jobqueue.domain.fields import DEFAULT_MAX_ATTEMPTS
from jobqueue.domain.job import NewJob, resolve
from jobqueue.domain.periodic import (
    GRACE,
    LEAD,
    PeriodicJob,
    Schedule,
    following,
    slot_to_insert,
)
from jobqueue.domain.ports import PeriodicSlots
from jobqueue.domain.registry import Registry
from jobqueue.domain.type_options import NO_OPTIONS

_log = logging.getLogger("jobqueue.worker")

RETRY_SECONDS = 1.0

Clock = Callable[[], datetime]


def _now() -> datetime:
    return datetime.now(UTC)


class PeriodicScheduler:
    """Inserts the job of every slot of each of `entries` (a periodic job and its
    schedule) until `stop()`."""

    def __init__(
        self,
        slots: PeriodicSlots,
        registry: Registry,
        entries: Sequence[tuple[PeriodicJob, Schedule]],
        *,
        default_max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        lead: timedelta = LEAD,
        clock: Clock = _now,
        on_due: Callable[[], None] | None = None,
    ) -> None:
        self._slots = slots
        self._registry = registry
        self._entries = list(entries)
        self._default_max_attempts = default_max_attempts
        self._lead = lead
        self._clock = clock
        # Wakes this process's pools at each slot: a job becoming due is otherwise found
        # only at the next poll.
        self._on_due = on_due
        self._stopping = asyncio.Event()

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        if not self._entries:
            return
        await asyncio.gather(
            *(self._keep(periodic, schedule) for periodic, schedule in self._entries)
        )

    async def _keep(self, periodic: PeriodicJob, schedule: Schedule) -> None:
        now = self._clock()
        if periodic.catch_up:
            await self._insert(periodic, schedule.latest_before(now), missed=True)
        slot = schedule.next_after(now)
        while not self._stopping.is_set():
            if not await self._wait((slot - self._lead - self._clock()).total_seconds()):
                return
            now = self._clock()
            chosen = slot_to_insert(schedule, slot, now, catch_up=periodic.catch_up)
            if chosen != slot:
                _log.warning(
                    "periodic job fell behind its schedule (a stall, or the clock jumped): "
                    "the slots it missed are let go",
                    extra={
                        "periodic": periodic.name,
                        "missed_from": slot.isoformat(),
                        "inserted": None if chosen is None else chosen.isoformat(),
                    },
                )
            if chosen is not None:
                await self._insert(periodic, chosen)
                slot = chosen
            if not await self._wait((slot - self._clock()).total_seconds()):
                return
            if chosen is not None and self._on_due is not None:
                self._on_due()
            slot = following(schedule, slot, self._clock())

    async def _insert(self, periodic: PeriodicJob, slot: datetime, *, missed: bool = False) -> None:
        # Resolved as every way in resolves a job: by the type's handler options when this
        # process has its handler; a type served only by other processes' handlers is
        # scheduled all the same, with the defaults.
        known = periodic.job_type in self._registry
        options = self._registry.options_for(periodic.job_type) if known else NO_OPTIONS
        new = resolve(
            NewJob.build(type=periodic.job_type, payload=periodic.payload, run_at=slot),
            options,
            self._default_max_attempts,
        )
        while not self._stopping.is_set():
            try:
                job = await self._slots.insert_slot(periodic.name, slot, new, missed=missed)
            except JobQueueError as error:
                if self._clock() - slot > GRACE:
                    _log.warning(
                        "periodic job not scheduled: the store failed until its slot had passed",
                        extra={
                            "periodic": periodic.name,
                            "slot": slot.isoformat(),
                            "error": str(error),
                        },
                    )
                    return
                if not await self._wait(RETRY_SECONDS):
                    return
                continue
            if job is not None:
                _log.info(
                    "periodic job scheduled",
                    extra={
                        "periodic": periodic.name,
                        "job_id": str(job.id),
                        "slot": slot.isoformat(),
                    },
                )
            return

    async def _wait(self, seconds: float) -> bool:
        """Sleep `seconds` (or not at all); return False when stopped meanwhile."""
        if seconds > 0:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(seconds):
                    await self._stopping.wait()
        return not self._stopping.is_set()
