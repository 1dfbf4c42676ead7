"""The process registry on PostgreSQL: heartbeats make a process a queue's consumer until
it leaves or its time runs out, and a queue with overdue jobs and no consumer is returned
once, to one caller, per episode."""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import replace
from datetime import timedelta
from uuid import uuid4

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.processes import PostgresProcesses
from jobqueue.adapters.postgres.queries.processes import NEWLY_UNCONSUMED
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.job import NewJob
from jobqueue.domain.processes import ProcessInfo, Unconsumed
from jobqueue.entrypoints.service.liveness import QueueWatch
from tests.support.plans import fill_table

TTL = timedelta(minutes=1)


@pytest.fixture(autouse=True)
async def no_processes(engine: AsyncEngine) -> None:
    """The registry empty (the `engine` fixture leaves it to running services)."""
    async with engine.begin() as connection:
        await connection.execute(text("DELETE FROM processes"))


def _process(*queues: str) -> ProcessInfo:
    return ProcessInfo(
        id=uuid4(),
        host="host-a",
        pid=4242,
        version="1.0",
        queues=queues,
        types=("sleep",),
        concurrency=4,
        running=1,
    )


async def _expire(engine: AsyncEngine, process: ProcessInfo) -> None:
    """As if the process was killed a lease ago: its expiry has passed."""
    async with engine.begin() as connection:
        await connection.execute(
            text("UPDATE processes SET expires_at = now() - interval '1 second' WHERE id = :id"),
            {"id": process.id},
        )


async def _submit(engine: AsyncEngine, queue: str, count: int = 1) -> None:
    store = PostgresJobStore(engine)
    for _ in range(count):
        await store.submit(NewJob.build(type="sleep", queue=queue, max_attempts=3))


async def test_a_queue_counts_the_live_processes_that_consume_it(engine: AsyncEngine) -> None:
    registry = PostgresProcesses(engine)
    first, second = _process("default", "emails"), _process("default")
    await registry.heartbeat(first, TTL)
    await registry.heartbeat(second, TTL)
    await registry.heartbeat(replace(second, running=3), TTL)  # a beat again: one row
    assert await registry.consumers() == {"default": 2, "emails": 1}

    await registry.leave(first.id)
    assert await registry.consumers() == {"default": 1}

    await _expire(engine, second)
    assert await registry.consumers() == {}
    # The next heartbeat of anyone removes the expired row.
    await registry.heartbeat(first, TTL)
    async with engine.connect() as connection:
        ids = (await connection.execute(text("SELECT id FROM processes"))).scalars().all()
    assert ids == [first.id]


async def test_the_live_processes_are_listed_with_their_heartbeats(engine: AsyncEngine) -> None:
    registry = PostgresProcesses(engine)
    first = replace(_process("default", "emails"), concurrency=12, queue_concurrency=(10, 2))
    second = replace(_process("emails"), pid=1, host="host-b")
    await registry.heartbeat(first, TTL)
    await registry.heartbeat(second, TTL)
    await _expire(engine, second)

    [live] = await registry.live()

    assert live.info == first
    assert live.started_at <= live.heartbeat_at
    await registry.heartbeat(replace(first, running=3), TTL)
    [again] = await registry.live()
    assert (again.info.running, again.started_at) == (3, live.started_at)
    assert again.heartbeat_at >= live.heartbeat_at


async def test_get_queues_shows_consumers_and_flags_a_queue_nobody_consumes(
    engine: AsyncEngine,
) -> None:
    registry = PostgresProcesses(engine)
    await registry.heartbeat(_process("default", "idle"), TTL)
    await _submit(engine, "default")
    await _submit(engine, "reports", 2)

    summaries = {each.state.name: each for each in await PostgresJobStore(engine).queue_summaries()}

    assert {name: (s.consumers, s.due, s.unconsumed) for name, s in summaries.items()} == {
        "default": (1, 1, False),
        "idle": (1, 0, False),
        "reports": (0, 2, True),
    }


async def test_an_unconsumed_queue_is_returned_once_per_episode(engine: AsyncEngine) -> None:
    registry = PostgresProcesses(engine)
    await _submit(engine, "reports", 3)
    await _submit(engine, "default")
    worker = _process("default")
    await registry.heartbeat(worker, TTL)

    assert await registry.newly_unconsumed(timedelta(0)) == [Unconsumed("reports", 3)]
    assert await registry.newly_unconsumed(timedelta(0)) == []
    # Not yet overdue for a grace longer than the jobs have waited.
    reports = _process("reports")
    await registry.heartbeat(reports, TTL)
    assert await registry.newly_unconsumed(timedelta(0)) == []

    # Consumed again, then its consumer dies: a new episode, warned of again.
    await _expire(engine, reports)
    assert await registry.newly_unconsumed(timedelta(hours=1)) == []
    assert await registry.newly_unconsumed(timedelta(0)) == [Unconsumed("reports", 3)]


async def test_many_watchers_warn_of_a_queue_once(
    engine: AsyncEngine, caplog: pytest.LogCaptureFixture
) -> None:
    await _submit(engine, "reports", 2)
    watchers = [
        QueueWatch(PostgresProcesses(engine), interval=timedelta(hours=1), grace=timedelta(0))
        for _ in range(4)
    ]
    caplog.set_level(logging.WARNING, logger="jobqueue")

    tasks = [asyncio.create_task(watcher.run()) for watcher in watchers]
    deadline = asyncio.get_running_loop().time() + 10
    async with engine.connect() as connection:
        while not (
            await connection.execute(
                text("SELECT unconsumed_warned_at IS NOT NULL FROM queues WHERE name = 'reports'")
            )
        ).scalar():
            assert asyncio.get_running_loop().time() < deadline
            await connection.rollback()
            await asyncio.sleep(0.02)
    for watcher in watchers:
        watcher.stop()
    await asyncio.gather(*tasks)

    warnings = [r for r in caplog.records if "no live process consumes it" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "'reports'" in warnings[0].getMessage()
    assert (getattr(warnings[0], "queue", None), getattr(warnings[0], "due", None)) == (
        "reports",
        2,
    )


def test_the_watch_reads_one_index_probe_per_queue_not_per_job(database_url: str) -> None:
    fill_table(database_url, [], scheduled=50_000)

    async def explained() -> str:
        engine = create_engine(database_url, pool_size=1)
        try:
            await PostgresProcesses(engine).heartbeat(_process("default"), TTL)
            async with engine.connect() as connection:
                query = text("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + NEWLY_UNCONSUMED.sql)
                result = await connection.execute(query, {"grace": timedelta(0)})
                plan = "\n".join(row[0] for row in result)
                await connection.rollback()
            return plan
        finally:
            await engine.dispose()

    plan = asyncio.run(explained())
    # Only a sequential scan that ran is refused: the count of a queue nobody consumes
    # does not run here, and PostgreSQL 15 plans it as one on this one-queue table (18,
    # with skip scans, reads the index).
    scanned = [line for line in plan.splitlines() if "Seq Scan on jobs" in line]
    assert all("(never executed)" in line for line in scanned), plan
    top = next(line for line in plan.splitlines() if "Buffers:" in line)
    touched = sum(int(n) for n in re.findall(r"shared (?:hit|read|dirtied|written)=(\d+)", top))
    # 50,040 pending jobs: the loose scan reads a few index pages per queue.
    assert touched < 100, plan


async def test_a_process_that_says_no_share_per_queue_is_read_with_none(
    engine: AsyncEngine,
) -> None:
    # A process of an earlier version writes no queue_concurrency: NULL, read as unknown.
    registry = PostgresProcesses(engine)
    await registry.heartbeat(_process("default", "emails"), TTL)

    [live] = await registry.live()

    assert live.info.queue_concurrency == ()
    assert live.info.concurrency_of() == (("default", None), ("emails", None))
