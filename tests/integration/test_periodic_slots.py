"""A periodic slot runs at most once, ever: PostgreSQL keeps each schedule's last slot and
inserts a slot's job only in the statement that moves it forward, whatever retention has
deleted since, however many processes insert it, and whatever their clocks say."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.cron import schedules
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.job import NewJob
from jobqueue.domain.periodic import LastSlot
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.entrypoints.worker.periodic_scheduler import PeriodicScheduler

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def _job(slot: datetime) -> NewJob:
    return NewJob(type="tick", max_attempts=1, run_at=slot)


async def _delete_jobs(engine: AsyncEngine) -> None:
    # What retention does to finished jobs, done at once.
    async with engine.begin() as connection:
        await connection.execute(text("DELETE FROM jobs"))


async def test_a_slot_is_inserted_once_and_never_again_after_its_job_is_deleted(
    engine: AsyncEngine,
) -> None:
    store = PostgresJobStore(engine)
    first = await store.insert_slot("tick", T0, _job(T0))
    assert first is not None
    assert first == await store.get(first.id)
    # A second process, a restart: the same slot inserts nothing.
    assert await store.insert_slot("tick", T0, _job(T0)) is None
    # Retention deleted its job: still nothing; nor an earlier slot (a clock behind).
    await _delete_jobs(engine)
    assert await store.insert_slot("tick", T0, _job(T0)) is None
    assert await store.insert_slot("tick", T0 - timedelta(seconds=1), _job(T0)) is None
    # The next slot goes in, and is the last one now.
    later = T0 + timedelta(seconds=1)
    job = await store.insert_slot("tick", later, _job(later))
    assert job is not None
    assert await store.last_slots() == {"tick": LastSlot(later, job.id)}
    # Its job, once retention deleted it, is no longer named.
    await _delete_jobs(engine)
    assert await store.last_slots() == {"tick": LastSlot(later, None)}


async def test_a_missed_slot_is_made_up_for_only_by_a_schedule_that_ran(
    engine: AsyncEngine,
) -> None:
    store = PostgresJobStore(engine)
    assert await store.insert_slot("new", T0, _job(T0), missed=True) is None
    assert "new" not in await store.last_slots()
    await store.insert_slot("old", T0, _job(T0))
    later = T0 + timedelta(hours=1)
    assert await store.insert_slot("old", later, _job(later), missed=True) is not None
    assert await store.insert_slot("old", later, _job(later), missed=True) is None


def _ticking() -> Registry:
    registry = Registry()

    @registry.periodic("* * * * * *", catch_up=True)
    async def tick(ctx: JobContext, payload: Any) -> None:
        pass

    return registry


async def _scheduled_for(
    store: PostgresJobStore, registry: Registry, seconds: float, **options: Any
) -> None:
    scheduler = PeriodicScheduler(
        store, registry, schedules(registry), lead=timedelta(milliseconds=300), **options
    )
    task = asyncio.create_task(scheduler.run())
    await asyncio.sleep(seconds)
    scheduler.stop()
    await asyncio.wait_for(task, 5)


async def _slots(engine: AsyncEngine) -> list[datetime]:
    async with engine.connect() as connection:
        rows = await connection.execute(text("SELECT run_at FROM jobs ORDER BY run_at"))
        return [row[0] for row in rows]


async def test_with_a_seconds_cron_retention_and_a_restart_do_not_run_a_slot_again(
    engine: AsyncEngine,
) -> None:
    store = PostgresJobStore(engine)
    registry = _ticking()
    await _scheduled_for(store, registry, 1.6)
    ran = await _slots(engine)
    assert len(ran) >= 1
    await _delete_jobs(engine)

    # A restart with catch_up right away: the latest slot that passed is one that ran.
    await _scheduled_for(store, registry, 0.05)
    assert not set(await _slots(engine)) & set(ran)
    assert (await store.last_slots())["tick"].slot >= max(ran)


class JumpingClock:
    """The wall clock, plus an offset a test moves: a clock that jumps."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset


async def test_a_scheduler_whose_clock_jumps_ten_minutes_ahead_inserts_at_most_one_slot(
    engine: AsyncEngine,
) -> None:
    store = PostgresJobStore(engine)
    registry = _ticking()
    clock = JumpingClock()
    scheduling = asyncio.create_task(_scheduled_for(store, registry, 4.0, clock=clock))
    await asyncio.sleep(1.5)
    jumped_at = datetime.now(UTC)
    clock.offset = timedelta(minutes=10)
    await scheduling

    slots = await _slots(engine)
    skipped = [slot for slot in slots if jumped_at < slot < jumped_at + timedelta(minutes=10)]
    assert len(skipped) <= 1, slots
    after = [slot for slot in slots if slot >= jumped_at + timedelta(minutes=10)]
    assert 1 <= len(after) <= 4, slots
    assert all(b - a == timedelta(seconds=1) for a, b in pairwise(after))
