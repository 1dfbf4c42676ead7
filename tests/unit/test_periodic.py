"""Periodic jobs: declared on the registry, their cron read by croniter in their time
zone, and scheduled by any number of schedulers with one job per slot."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

import pytest

from jobqueue.adapters.cron import CronSchedule
from jobqueue.domain.periodic import PeriodicJob
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.status import Status
from jobqueue.entrypoints.worker.cron import PeriodicScheduler, schedules
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
    assert {job.unique_key for job in store.jobs()} == {
        f"periodic:tick:{slot.isoformat()}" for slot in slots
    }


async def test_catch_up_runs_the_last_slot_missed_once() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()
    # A type this process has no handler of: other workers may serve it.
    registry.schedule(PeriodicJob("0 * * * *", "hourly", catch_up=True))
    entries = schedules(registry)
    for _ in range(2):
        scheduler = PeriodicScheduler(store, registry, entries)
        task = asyncio.create_task(scheduler.run())
        await asyncio.sleep(0.05)
        scheduler.stop()
        await asyncio.wait_for(task, 5)

    (missed,) = [job for job in store.jobs() if job.run_at <= datetime.now(UTC)]
    assert missed.run_at.minute == 0


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
