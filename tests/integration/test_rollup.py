"""The dashboard's rollup on a real PostgreSQL: a pool's attempts land in the current
minute's rows after a flush, concurrent flushes add up, a chart's series sums its slots
and fills the empty ones, and retention deletes the rows past two days, batch by batch."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.payloads import MsgspecPayloadDecoder
from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.rollup import PostgresRollup
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.errors import Permanent
from jobqueue.domain.job import NewJob
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.retention import RetentionPolicy
from jobqueue.domain.throughput import LAST_DAY, LAST_HOUR, RollupCounts, Tallies, bucket_of
from jobqueue.entrypoints.worker.pool import WorkerPool
from jobqueue.entrypoints.worker.retention import RetentionLoop
from jobqueue.entrypoints.worker.throughput import Counting, RollupFlusher
from tests.support.worker_pools import CONFIG, until


async def _rows(engine: AsyncEngine) -> dict[str, dict[str, Any]]:
    async with engine.connect() as connection:
        result = await connection.execute(
            text("SELECT * FROM job_rollup WHERE minute = date_trunc('minute', now())")
        )
        return {row["queue"]: dict(row) for row in result.mappings()}


async def test_a_pools_attempts_are_in_the_current_minutes_rows_after_a_flush(
    engine: AsyncEngine,
) -> None:
    store = PostgresJobStore(engine)
    registry = Registry()

    @registry.handler("greet")
    async def greet(ctx: JobContext, payload: Any) -> None:
        pass

    @registry.handler("doomed")
    async def doomed(ctx: JobContext, payload: Any) -> None:
        raise Permanent("never")

    @registry.handler("flaky")
    async def flaky(ctx: JobContext, payload: Any) -> None:
        if ctx.attempt == 1:
            raise RuntimeError("try again")

    for job_type, queue in [("greet", "r-one"), ("greet", "r-one"), ("greet", "r-one")]:
        await store.submit(NewJob(type=job_type, queue=queue, max_attempts=1))
    await store.submit(NewJob(type="doomed", queue="r-two", max_attempts=3))
    await store.submit(NewJob(type="flaky", queue="r-two", max_attempts=3))
    tallies = Tallies()
    flusher = RollupFlusher(tallies, PostgresRollup(engine))
    pools = [
        WorkerPool(
            store,
            registry,
            MsgspecPayloadDecoder(),
            replace(CONFIG, queue=queue),
            observer=Counting(tallies),
        )
        for queue in ("r-one", "r-two")
    ]
    tasks = [asyncio.create_task(pool.run()) for pool in pools]

    async def all_ended() -> bool:
        async with engine.connect() as connection:
            live: int = await connection.scalar(
                text("SELECT count(*) FROM jobs WHERE status IN ('pending', 'processing')")
            )
        return live == 0

    try:
        await until(all_ended, "every job ended")
    finally:
        for pool in pools:
            pool.stop()
        await asyncio.gather(*tasks)
    await flusher.flush()

    rows = await _rows(engine)
    assert {
        queue: (row["completed"], row["failed"], row["retried"]) for queue, row in rows.items()
    } == {
        "r-one": (3, 0, 0),
        "r-two": (1, 1, 1),
    }
    assert rows["r-one"]["picked"] == 3
    assert rows["r-two"]["picked"] == 3, "the retry's attempt waited too"
    assert sum(rows["r-one"][f"pickup_{bound}ms"] for bound in (10, 50, 250, 1000, 5000)) == 3
    assert rows["r-one"]["pickup_seconds"] >= 0
    assert tallies.take() == {}, "what was flushed is not flushed again"


async def test_concurrent_flushes_from_two_engines_add_up(
    engine: AsyncEngine, database_url: str
) -> None:
    # Two connection pools, as two worker processes have, flushing the same rows at once.
    other = create_engine(database_url, pool_size=2)
    try:
        first, second = PostgresRollup(engine), PostgresRollup(other)
        one = {
            "c-a": RollupCounts(completed=1, picked=1, pickup_seconds=0.5),
            "c-b": RollupCounts(failed=1),
        }
        one["c-a"].pickup_buckets[bucket_of(0.5)] = 1
        other_order = {"c-b": RollupCounts(failed=2), "c-a": RollupCounts(retried=1)}

        await asyncio.gather(
            *(first.add(one) for _ in range(20)), *(second.add(other_order) for _ in range(20))
        )
    finally:
        await other.dispose()

    rows = await _rows(engine)
    assert (rows["c-a"]["completed"], rows["c-a"]["retried"], rows["c-a"]["picked"]) == (20, 20, 20)
    assert rows["c-a"]["pickup_seconds"] == 10.0
    assert rows["c-a"][f"pickup_{1000}ms"] == 20
    assert rows["c-b"]["failed"] == 60


async def _insert(engine: AsyncEngine, minutes_ago: int, queue: str, **counts: int) -> None:
    columns = ", ".join(counts)
    values = ", ".join(str(value) for value in counts.values())
    async with engine.begin() as connection:
        await connection.execute(
            text(
                f"INSERT INTO job_rollup (minute, queue, {columns}) VALUES ("
                f"date_trunc('minute', now()) - make_interval(mins => {minutes_ago}), "
                f"'{queue}', {values})"
            )
        )


async def test_a_series_sums_its_slots_fills_the_empty_ones_and_filters_by_queue(
    engine: AsyncEngine,
) -> None:
    rollup = PostgresRollup(engine)
    await _insert(engine, 0, "s-a", completed=5, picked=5, pickup_10ms=5)
    await _insert(engine, 0, "s-b", completed=2, failed=1)
    await _insert(engine, 10, "s-a", retried=4)
    # Outside the hour, inside the day; and outside both.
    await _insert(engine, 200, "s-a", completed=7)
    await _insert(engine, 3000, "s-a", completed=100)

    hour = await rollup.series(LAST_HOUR)
    one_queue = await rollup.series(LAST_HOUR, "s-b")
    day = await rollup.series(LAST_DAY)

    assert len(hour) == 60
    assert [slot.at for slot in hour] == sorted(slot.at for slot in hour)
    assert (hour[-1].completed, hour[-1].failed, hour[-1].picked) == (7, 1, 5)
    assert hour[-1].pickup_buckets[0] == 5
    assert hour[-11].retried == 4
    assert sum(slot.completed for slot in hour) == 7, "the hour holds nothing older"
    assert [slot.completed for slot in one_queue][-1] == 2
    assert sum(slot.retried for slot in one_queue) == 0
    assert len(day) == 96
    assert day[-1].at - day[0].at == LAST_DAY.step * 95
    assert sum(slot.completed for slot in day) == 14
    assert sum(slot.retried for slot in day) == 4


async def test_retention_deletes_the_rollup_rows_past_two_days_in_batches(
    engine: AsyncEngine,
) -> None:
    for minutes_ago in (3 * 1440, 3 * 1440 + 1, 3 * 1440 + 2, 2 * 1440 + 30, 2 * 1440 + 31):
        await _insert(engine, minutes_ago, "old", completed=1)
    await _insert(engine, 1440, "kept", completed=1)
    await _insert(engine, 2 * 1440 - 30, "kept", completed=1)
    # Jobs kept forever: the pass still prunes the rollup.
    retention = RetentionLoop(
        PostgresJobStore(engine),
        RetentionPolicy(completed=None, failed=None),
        batch_size=2,
        rollup=PostgresRollup(engine),
    )

    await retention.run_once()

    async with engine.connect() as connection:
        left = (
            await connection.execute(text("SELECT queue, count(*) FROM job_rollup GROUP BY queue"))
        ).all()
    assert dict(left) == {"kept": 2}
