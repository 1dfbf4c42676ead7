"""One benchmark run: the scenarios in order, on an empty table and then on one holding
many finished jobs; first of all, how long a worker process takes to start."""

from __future__ import annotations

import asyncio
import os
import platform
import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

import jobqueue
from bench.database import Server, engine_on, scratch_database
from bench.drain import drain
from bench.enqueue import enqueue_in_batches, enqueue_many_in_batches, submit_one_per_call
from bench.pickup import pickup
from bench.pools import POLL_INTERVAL
from bench.probe import noop_job
from bench.progress import progress
from bench.results import Measurement
from bench.startup import worker_startup
from bench.table import reset, seed_history, server_facts, table_size
from jobqueue.adapters.postgres.migrations import upgrade


@dataclass(frozen=True, slots=True)
class Sizes:
    jobs: int  # per enqueue run and per drain
    workers: int  # per pool
    finished_rows: int  # history for the second round of drains and pickups; 0 skips it
    latency_samples: int  # per pickup run
    startup_runs: int  # timed worker start-ups
    submitters: tuple[int, ...] = (1, 8)
    batch: int = 1_000  # jobs per transaction in the bulk enqueues


DEFAULT_SIZES = Sizes(
    jobs=10_000, workers=8, finished_rows=1_000_000, latency_samples=200, startup_runs=5
)
QUICK_SIZES = Sizes(
    jobs=100, workers=4, finished_rows=2_000, latency_samples=10, startup_runs=2, batch=25
)


@dataclass(slots=True)
class Run:
    sizes: Sizes
    environment: dict[str, str | int | float] = field(default_factory=dict)
    measurements: list[Measurement] = field(default_factory=list)

    def settings(self) -> dict[str, object]:
        return {**asdict(self.sizes), "poll_interval_ms": _milliseconds(POLL_INTERVAL)}


async def run(server: Server, sizes: Sizes) -> Run:
    result = Run(sizes)
    async with scratch_database(server) as scratch:
        async with progress("migrating the scratch database"):
            await asyncio.to_thread(upgrade, scratch.url)
        # Large enough for the most connections any scenario holds at once: every
        # submitter, or two pools' outcome writes plus their claims and the drain's check.
        pool_size = max(*sizes.submitters, 2 * sizes.workers + 3)
        async with engine_on(scratch.url, pool_size) as engine:
            facts = await server_facts(engine)
            result.environment.update(
                postgresql=facts.version,
                server_version_num=facts.version_num,
                fsync=facts.fsync,
                synchronous_commit=facts.synchronous_commit,
                shared_buffers=facts.shared_buffers,
                database_source=server.source,
                database=scratch.name,
                cpu_count=os.cpu_count() or 0,
                python=platform.python_version(),
                jobqueue_package=_jobqueue_package(),
            )
            # First, while nothing else has run: a start-up is sensitive to a busy machine.
            await _startup(engine, scratch.url, sizes, result.measurements)
            await _enqueue(engine, sizes, result.measurements)
            await _warm_up(engine, sizes)
            await _workers(engine, sizes, "empty", "empty table", result.measurements)
            if sizes.finished_rows:
                await reset(engine)
                seeding = time.perf_counter()
                async with progress(f"inserting {sizes.finished_rows:,} finished rows"):
                    await seed_history(engine, sizes.finished_rows)
                    await reset(engine)
                # Insert plus VACUUM ANALYZE: how long building the history took, for scale.
                result.environment["history_seed_seconds"] = time.perf_counter() - seeding
                result.environment["history_table_size"] = await table_size(engine)
                history = f"{sizes.finished_rows:,} finished rows"
                await _workers(engine, sizes, "history", history, result.measurements)
    return result


async def _startup(engine: AsyncEngine, url: str, sizes: Sizes, into: list[Measurement]) -> None:
    label = "worker start-up: spawn → first handler call (METRICS_ADDR=off, AUTO_MIGRATE=false)"
    result = await worker_startup(engine, url, sizes.startup_runs, label)
    into.append(Measurement("startup.worker", label, result))


async def _enqueue(engine: AsyncEngine, sizes: Sizes, into: list[Measurement]) -> None:
    new = noop_job()
    for submitters in sizes.submitters:
        await reset(engine)
        noun = "submitter" if submitters == 1 else "submitters"
        label = f"enqueue: submit(), 1 job per transaction, {submitters} {noun}"
        result = await submit_one_per_call(engine, new, sizes.jobs, submitters, label)
        into.append(Measurement(f"enqueue.single.c{submitters}", label, result))
    await reset(engine)
    label = f"enqueue: enqueue() × {sizes.batch:,} per transaction"
    result = await enqueue_in_batches(engine, new, sizes.jobs, sizes.batch, label)
    into.append(Measurement("enqueue.bulk.in_transaction", label, result))
    await reset(engine)
    label = f"enqueue: enqueue_many() of {sizes.batch:,} per transaction"
    result = await enqueue_many_in_batches(engine, new, sizes.jobs, sizes.batch, label)
    into.append(Measurement("enqueue.bulk.many", label, result))


async def _warm_up(engine: AsyncEngine, sizes: Sizes) -> None:
    """An untimed drain, so that the first measured one does not also pay for preparing
    the claim and outcome statements on every connection, which later runs never do."""
    await reset(engine)
    jobs = 10 * sizes.workers
    await drain(engine, jobs, 2, sizes.workers, f"warm-up: drain {jobs} jobs, untimed")


async def _workers(
    engine: AsyncEngine, sizes: Sizes, phase: str, table: str, into: list[Measurement]
) -> None:
    """Drains and pickups, with the table as it is now plus each run's own jobs."""
    workers = sizes.workers
    for pools in (1, 2):
        await reset(engine)
        plural = "s" if pools > 1 else ""
        label = f"drain: {pools} pool{plural} × {workers} workers, {table}"
        result = await drain(engine, sizes.jobs, pools, workers, label)
        into.append(Measurement(f"drain.{phase}.{pools}pool{plural}", label, result))
    poll_ms = f"{_milliseconds(POLL_INTERVAL):g} ms"
    for mode, wake, how in (
        ("poll", False, f"polling only ({poll_ms})"),
        ("wake", True, "wake() after submit"),
    ):
        await reset(engine)
        label = f"pickup: {how}, {table}"
        latency = await pickup(engine, sizes.latency_samples, workers, wake=wake, label=label)
        into.append(Measurement(f"pickup.{phase}.{mode}", label, latency))


def _jobqueue_package() -> str:
    """Where the measured code came from: a run against another checkout says so."""
    return str(Path(jobqueue.__file__).resolve().parent)


def _milliseconds(value: timedelta) -> float:
    return value.total_seconds() * 1000
