"""Periodic jobs: declared on the registry, their cron read by croniter in their time
zone, and scheduled by any number of schedulers with one job per slot."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

import pytest

from jobqueue.adapters.cron import CronSchedule, schedules
from jobqueue.domain.job import NewJob
from jobqueue.domain.periodic import GRACE, LastSlot, PeriodicJob, slot_to_insert
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.status import Status
from jobqueue.entrypoints.worker.periodic_scheduler import PeriodicScheduler
from tests.fakes import InMemoryJobStore, wall_clock


def test_the_decorator_registers_the_handler_and_its_schedule() -> None:
    registry = Registry()

    @registry.periodic("*/5 * * * *", timezone="Europe/Paris", queue="reports", payload={"a": 1})
    async def nightly(ctx: JobContext, payload: Any) -> None: ...

    assert "nightly" in registry
    assert registry.options_for("nightly").queue == "reports"
    (periodic,) = registry.periodic_jobs()
    assert (periodic.name, periodic.job_type, periodic.cron, periodic.payload) == (
        "nightly",
        "nightly",
        "*/5 * * * *",
        {"a": 1},
    )


def test_slots_are_in_the_schedule_s_time_zone_and_seconds_come_first() -> None:
    paris = CronSchedule(PeriodicJob("0 3 * * *", "report", timezone="Europe/Paris"))
    # 03:00 in Paris is 02:00 UTC in winter.
    assert paris.next_after(datetime(2026, 12, 2, 6, 0, tzinfo=UTC)) == datetime(
        2026, 12, 3, 2, 0, tzinfo=UTC
    )
    every_five = CronSchedule(PeriodicJob("*/5 * * * * *", "tick"))
    moment = datetime(2026, 12, 2, 6, 0, 7, 500_000, tzinfo=UTC)
    assert every_five.next_after(moment) == datetime(2026, 12, 2, 6, 0, 10, tzinfo=UTC)
    assert every_five.latest_before(moment) == datetime(2026, 12, 2, 6, 0, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: CronSchedule(PeriodicJob("61 * * * *", "t")), "is not a cron expression"),
        (lambda: PeriodicJob("* * * * *", "t", timezone="Mars/Olympus"), "unknown time zone"),
        (lambda: PeriodicJob("", "t"), "needs a cron expression"),
    ],
)
def test_a_schedule_that_cannot_run_is_refused_naming_it(build: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()


def test_a_name_is_declared_once() -> None:
    registry = Registry()
    registry.schedule(PeriodicJob("* * * * *", "a"))
    with pytest.raises(ValueError, match="declared twice"):
        registry.schedule(PeriodicJob("*/2 * * * *", "a"))


async def test_several_schedulers_make_one_job_per_slot_each_due_at_its_slot() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()

    @registry.periodic("* * * * * *")
    async def tick(ctx: JobContext, payload: Any) -> None: ...

    entries = schedules(registry)
    schedulers = [
        PeriodicScheduler(store, registry, entries, lead=timedelta(milliseconds=300))
        for _ in range(3)
    ]
    tasks = [asyncio.create_task(s.run()) for s in schedulers]
    await asyncio.sleep(2.5)
    for scheduler in schedulers:
        scheduler.stop()
    await asyncio.wait_for(asyncio.gather(*tasks), 5)

    slots = sorted(job.run_at for job in store.jobs())
    assert len(slots) >= 2
    assert len(set(slots)) == len(slots)
    assert all(slot.microsecond == 0 for slot in slots)
    assert all(b - a == timedelta(seconds=1) for a, b in pairwise(slots))
    assert {job.status for job in store.jobs()} == {Status.PENDING}
    [last_job] = [job for job in store.jobs() if job.run_at == slots[-1]]
    assert (await store.last_slots())["tick"] == LastSlot(slots[-1], last_job.id)


async def test_catch_up_runs_the_latest_slot_missed_once_for_a_schedule_that_ran() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()
    # A type this process has no handler of: other workers may serve it.
    registry.schedule(PeriodicJob("0 * * * *", "hourly", catch_up=True))
    entries = schedules(registry)

    async def start_and_stop() -> None:
        scheduler = PeriodicScheduler(store, registry, entries)
        task = asyncio.create_task(scheduler.run())
        await asyncio.sleep(0.05)
        scheduler.stop()
        await asyncio.wait_for(task, 5)

    # A new schedule missed nothing: it never ran.
    await start_and_stop()
    assert store.jobs() == []
    # It ran three hours ago; since then no process ran: the latest slot, once.
    now = datetime.now(UTC)
    three_hours_ago = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    ran = NewJob(type="hourly", max_attempts=1, run_at=three_hours_ago)
    assert await store.insert_slot("hourly", three_hours_ago, ran)
    for _ in range(2):
        await start_and_stop()

    missed = [job.run_at for job in store.jobs() if job.run_at > three_hours_ago]
    assert missed == [now.replace(minute=0, second=0, microsecond=0)]


async def test_the_scheduler_wakes_its_pools_at_each_slot() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()
    registry.schedule(PeriodicJob("* * * * * *", "tick"))
    woken: list[datetime] = []
    scheduler = PeriodicScheduler(
        store, registry, schedules(registry), on_due=lambda: woken.append(datetime.now(UTC))
    )
    task = asyncio.create_task(scheduler.run())
    await asyncio.sleep(2.2)
    scheduler.stop()
    await asyncio.wait_for(task, 5)

    due = sorted(job.run_at for job in store.jobs())
    assert len(woken) >= 2
    # Each wake-up at (just after) a slot whose job was already in the store.
    for moment in woken:
        assert any(timedelta(0) <= moment - slot < timedelta(milliseconds=200) for slot in due)


def test_a_scheduler_that_fell_behind_inserts_the_latest_slot_due_only() -> None:
    every_second = CronSchedule(PeriodicJob("* * * * * *", "tick"))
    slot = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)
    # On time (woken before the slot): that slot.
    assert slot_to_insert(every_second, slot, slot - timedelta(seconds=5), catch_up=False) == slot
    # A little late, the next slot not passed yet: still that slot, late.
    late = slot + timedelta(milliseconds=200)
    assert slot_to_insert(every_second, slot, late, catch_up=False) == slot
    # Ten minutes behind (a stall, a clock that jumped): only the latest slot that
    # passed, never the six hundred in between.
    jumped = slot + timedelta(minutes=10, milliseconds=500)
    latest = slot_to_insert(every_second, slot, jumped, catch_up=False)
    assert latest == slot + timedelta(minutes=10)
    # A daily slot missed by more than the grace is let go, unless the schedule catches up.
    daily = CronSchedule(PeriodicJob("0 3 * * *", "report"))
    three = datetime(2030, 1, 1, 3, 0, tzinfo=UTC)
    stalled = three + GRACE + timedelta(seconds=1)
    assert slot_to_insert(daily, three, stalled, catch_up=False) is None
    assert slot_to_insert(daily, three, stalled, catch_up=True) == three


class JumpingClock:
    """The wall clock, plus an offset a test moves: a clock that jumps."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset


async def test_a_clock_that_jumps_ten_minutes_ahead_inserts_at_most_one_missed_slot() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()
    registry.schedule(PeriodicJob("* * * * * *", "tick"))
    clock = JumpingClock()
    scheduler = PeriodicScheduler(
        store, registry, schedules(registry), lead=timedelta(milliseconds=300), clock=clock
    )
    task = asyncio.create_task(scheduler.run())
    await asyncio.sleep(1.5)
    before = datetime.now(UTC)
    clock.offset = timedelta(minutes=10)
    await asyncio.sleep(2.5)
    scheduler.stop()
    await asyncio.wait_for(task, 5)

    slots = sorted(job.run_at for job in store.jobs())
    # Slots in the ten minutes the clock skipped: at most one, never the six hundred.
    skipped = [slot for slot in slots if before < slot < before + timedelta(minutes=10)]
    assert len(skipped) <= 1, skipped
    # Then one a second again, on the new clock.
    after = [slot for slot in slots if slot >= before + timedelta(minutes=10)]
    assert 1 <= len(after) <= 4, slots
    assert all(b - a == timedelta(seconds=1) for a, b in pairwise(after))
