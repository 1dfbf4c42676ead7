"""The periodic jobs of a worker process: each slot's job inserted shortly before the slot,
by every process, with no leader (`domain/periodic.py` says why one job per slot exists).

Slots are computed from this process's clock and inserted due at the slot, so the claim
(on the database's clock) starts them; a process whose clock runs a little behind only
inserts a duplicate, answered with the job another process inserted. At the slot the
process wakes its own pools, so the job starts then rather than at the next poll. A store that
fails is tried again every `RETRY_SECONDS` until the slot is `GIVE_UP_AFTER` old, then
the slot is let go (logged): a periodic job is not made up for after an outage.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from jobqueue.domain.errors import JobQueueError
from jobqueue.domain.fields import DEFAULT_MAX_ATTEMPTS
from jobqueue.domain.new_job import NewJob
from jobqueue.domain.periodic import LEAD, PeriodicJob, Schedule
from jobqueue.domain.ports import JobStore
from jobqueue.domain.registry import Registry

_log = logging.getLogger("jobqueue.worker")

RETRY_SECONDS = 1.0
GIVE_UP_AFTER = timedelta(minutes=1)

Clock = Callable[[], datetime]


def _now() -> datetime:
    return datetime.now(UTC)


class PeriodicScheduler:
    """Inserts the job of every slot of each of `entries` (a periodic job and its
    schedule) until `stop()`."""

    def __init__(
        self,
        store: JobStore,
        registry: Registry,
        entries: Sequence[tuple[PeriodicJob, Schedule]],
        *,
        default_max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        lead: timedelta = LEAD,
        clock: Clock = _now,
        on_due: Callable[[], None] | None = None,
    ) -> None:
        self._store = store
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
            await self._insert(periodic, schedule.latest_before(now))
        slot = schedule.next_after(now)
        while not self._stopping.is_set():
            if not await self._wait((slot - self._lead - self._clock()).total_seconds()):
                return
            await self._insert(periodic, slot)
            if not await self._wait((slot - self._clock()).total_seconds()):
                return
            if self._on_due is not None:
                self._on_due()
            slot = schedule.next_after(slot)

    async def _insert(self, periodic: PeriodicJob, slot: datetime) -> None:
        # The type's handler options when this process has its handler; a type served
        # only by other processes' handlers is scheduled all the same.
        known = periodic.job_type in self._registry
        new = NewJob.build(
            type=periodic.job_type,
            payload=periodic.payload,
            default_max_attempts=self._default_max_attempts,
            registered=self._registry if known else None,
            run_at=slot,
            unique=periodic.slot_unique(slot),
        )
        while not self._stopping.is_set():
            try:
                submitted = await self._store.submit(new)
            except JobQueueError as error:
                if self._clock() - slot > GIVE_UP_AFTER:
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
            if not submitted.duplicate:
                _log.info(
                    "periodic job scheduled",
                    extra={
                        "periodic": periodic.name,
                        "job_id": str(submitted.job.id),
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


def schedules(registry: Registry) -> list[tuple[PeriodicJob, Schedule]]:
    """Each periodic job of `registry` with its cron schedule; raises `ValueError` for
    an expression that is none (at start, naming the job)."""
    periodic_jobs = registry.periodic_jobs()
    if not periodic_jobs:
        return []
    # Imported only when there is a schedule to read: croniter (and dateutil) would be
    # start-up work for every worker process otherwise.
    from jobqueue.adapters.cron import CronSchedule

    return [(periodic, CronSchedule(periodic)) for periodic in periodic_jobs]


def next_slots(
    entries: Sequence[tuple[PeriodicJob, Schedule]],
) -> list[tuple[PeriodicJob, datetime]]:
    """Each periodic job with its next slot from now, for `GET /periodic`."""
    now = datetime.fromtimestamp(time.time(), UTC)
    return [(periodic, schedule.next_after(now)) for periodic, schedule in entries]
