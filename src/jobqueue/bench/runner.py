"""One benchmark run: the scenarios in order, those chosen (`--only`, `sizes.SCENARIOS`).
First how long a worker process takes to start; then in-process enqueues, drains and
pickups; then the same service as users run it, in `jobqueue api` and `jobqueue worker`
processes, with waits for jobs' ends through them, and jobs that wait for jobs (a chain,
a fan-out/fan-in); last, the in-process drains and pickups again, on a table holding
many jobs scheduled for later, then on one holding many finished jobs."""

from __future__ import annotations

import asyncio
import os
import platform
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from functools import partial
from pathlib import Path
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncEngine

import jobqueue
from jobqueue.adapters.postgres.migrations import upgrade
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.bench import over_http
from jobqueue.bench.database import Server, engine_on, scratch_database
from jobqueue.bench.drain import drain
from jobqueue.bench.enqueue import (
    enqueue_in_batches,
    enqueue_many_in_batches,
    enqueue_one_per_call,
)
from jobqueue.bench.graphs import dependencies
from jobqueue.bench.jobs_table import (
    noop_jobs,
    remove_scheduled,
    reset,
    seed_history,
    seed_scheduled,
    server_facts,
    table_size,
)
from jobqueue.bench.over_http import (
    running_api,
    submit_batches_over_http,
    submit_over_http,
)
from jobqueue.bench.pickup import pickup
from jobqueue.bench.pools import POLL_INTERVAL
from jobqueue.bench.probe import noop_job
from jobqueue.bench.process_pickup import pickup_in_process
from jobqueue.bench.progress import progress
from jobqueue.bench.results import Measurement, Throughput, median_run
from jobqueue.bench.sizes import (
    CHAIN,
    ENQUEUE,
    FAN,
    HISTORY,
    IN_PROCESS,
    PROCESSES,
    SCENARIOS,
    SCHEDULED,
    STARTUP,
    Sizes,
)
from jobqueue.bench.startup import worker_startup
from jobqueue.bench.waits import wait_for_endings
from jobqueue.bench.worker_handlers import PICKUP_TYPE
from jobqueue.bench.worker_processes import (
    WorkerProcesses,
    drain_in_processes,
    worker_processes,
    worker_settings,
)
from jobqueue.domain.fields import DEFAULT_QUEUE, JsonValue
from jobqueue.domain.flow import MAX_CONCURRENCY, MAX_RATE, NO_LIMITS, QueueLimits, Rate
from jobqueue.domain.job import NewJob


@dataclass(slots=True)
class Run:
    sizes: Sizes
    environment: dict[str, str | int | float] = field(default_factory=dict)
    measurements: list[Measurement] = field(default_factory=list)
    scenarios: tuple[str, ...] = SCENARIOS  # those that ran (`--only`)

    def settings(self) -> dict[str, object]:
        return {
            **asdict(self.sizes),
            "scenarios": self.scenarios,
            "poll_interval_ms": _milliseconds(POLL_INTERVAL),
            "worker_process_settings": worker_settings(self.sizes.process_workers),
        }


def seeded_rounds(sizes: Sizes) -> list[tuple[str, str]]:
    """The rounds of in-process drains and pickups on a seeded table, in the order they
    run: each one's phase (in its measurements' names) and what the table holds."""
    return [
        ("scheduled", f"{sizes.scheduled_rows:,} scheduled rows"),
        ("history", f"{sizes.finished_rows:,} finished rows"),
    ]


async def run(server: Server, sizes: Sizes, scenarios: tuple[str, ...] = SCENARIOS) -> Run:
    result = Run(sizes, scenarios=scenarios)
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
            if STARTUP in scenarios:
                await _startup(engine, scratch.url, sizes, result.measurements)
            if ENQUEUE in scenarios:
                await _enqueue(engine, sizes, result.measurements)
            if {IN_PROCESS, SCHEDULED, HISTORY} & set(scenarios):
                await _warm_up(engine, sizes)
            if IN_PROCESS in scenarios:
                await _workers(engine, sizes, "empty", "empty table", result.measurements)
            if {PROCESSES, CHAIN, FAN} & set(scenarios):
                await _processes(engine, scratch.url, sizes, result)
            tables = dict(seeded_rounds(sizes))
            if sizes.scheduled_rows and SCHEDULED in scenarios:
                seed = partial(seed_scheduled, engine, sizes.scheduled_rows)
                await _seeded(engine, sizes, "scheduled", tables["scheduled"], seed, result)
                # Gone before the history round, so that each round adds one thing only.
                await remove_scheduled(engine)
                await reset(engine)
            if sizes.finished_rows and HISTORY in scenarios:
                seed = partial(seed_history, engine, sizes.finished_rows)
                await _seeded(engine, sizes, "history", tables["history"], seed, result)
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
        label = f"enqueue: enqueue(engine), 1 job per call, {submitters} {noun}"
        result = await enqueue_one_per_call(engine, new, sizes.jobs, submitters, label)
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


# Limits set on the drained queue that never bind (the pools run far fewer at once, and
# start far fewer a second): what flow control's bookkeeping costs a queue that has it.
NOT_BINDING = QueueLimits(MAX_CONCURRENCY, Rate(MAX_RATE, timedelta(seconds=1)))
# Jobs spread over many keys, each with a per-key limit: what fair shares cost.
KEYS = 100
PER_KEY = QueueLimits(key_concurrency=2)
# Rounds of the limited drains, each beside a plain one: a drain lasts about a second, and
# one of each, minutes apart, compared the machine's moods more than the code (the same
# ratio came out 0.58 and 0.70 in two runs).
LIMITED_ROUNDS = 3


async def _limited(engine: AsyncEngine, sizes: Sizes, into: list[Measurement]) -> None:
    """The 2-pool drain again, alternated: without limits, its queue limited by
    `NOT_BINDING`, then its jobs over `KEYS` keys limited by `PER_KEY`, `LIMITED_ROUNDS`
    times; each is reported by its median run."""
    store = PostgresJobStore(engine)
    scenarios = (
        ("drain.plain.2pools", NO_LIMITS, 0, "no limits, alternated with the two below"),
        ("drain.limits.2pools", NOT_BINDING, 0, f"limits not binding ({NOT_BINDING})"),
        ("drain.keys.2pools", PER_KEY, KEYS, f"{KEYS} keys, {PER_KEY}"),
    )
    runs: dict[str, list[Throughput]] = {name: [] for name, *_ in scenarios}
    for round_number in range(1, LIMITED_ROUNDS + 1):
        for name, limits, keys, shown in scenarios:
            await reset(engine)
            await store.set_queue_limits(DEFAULT_QUEUE, limits)
            try:
                label = f"drain: 2 pools × {sizes.workers} workers, {shown}"
                progress_label = f"{label} (round {round_number} of {LIMITED_ROUNDS})"
                runs[name].append(
                    await drain(engine, sizes.jobs, 2, sizes.workers, progress_label, keys)
                )
            finally:
                await store.set_queue_limits(DEFAULT_QUEUE, NO_LIMITS)
    for name, _, _, shown in scenarios:
        label = f"drain: 2 pools × {sizes.workers} workers, {shown}, median of {LIMITED_ROUNDS}"
        into.append(Measurement(name, label, median_run(runs[name])))


async def _seeded(
    engine: AsyncEngine,
    sizes: Sizes,
    phase: str,
    table: str,
    seed: Callable[[], Awaitable[None]],
    result: Run,
) -> None:
    """The in-process drains and pickups again, on a table `seed` filled with `table`
    (`reset` keeps those rows), noting how long seeding took and how big the table got."""
    await reset(engine)
    seeding = time.perf_counter()
    async with progress(f"inserting {table}"):
        await seed()
        await reset(engine)
    # Insert plus VACUUM ANALYZE: how long building the table took, for scale.
    result.environment[f"{phase}_seed_seconds"] = time.perf_counter() - seeding
    result.environment[f"{phase}_table_size"] = await table_size(engine)
    await _workers(engine, sizes, phase, table, result.measurements)


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
    if phase == "empty":
        await _limited(engine, sizes, into)
    poll_ms = f"{_milliseconds(POLL_INTERVAL):g} ms"
    for mode, wake, how in (
        ("poll", False, f"polling only ({poll_ms})"),
        ("wake", True, "wake() after submit"),
    ):
        await reset(engine)
        label = f"pickup: {how}, {table}"
        latency = await pickup(engine, sizes.latency_samples, workers, wake=wake, label=label)
        into.append(Measurement(f"pickup.{phase}.{mode}", label, latency))


async def _processes(engine: AsyncEngine, url: str, sizes: Sizes, result: Run) -> None:
    """The service as users run it, on an empty table: a `jobqueue api` process taking
    submissions over HTTP, `jobqueue worker` processes woken by its NOTIFY (or an
    in-process `enqueue`'s), producers waiting for their jobs' ends (`waits.py`), jobs
    waiting for jobs (`graphs.py`), and drains with more and more worker processes."""
    into = result.measurements
    with tempfile.TemporaryDirectory(prefix="jobqueue-bench-processes-") as directory:
        folder = Path(directory)
        async with worker_processes(url, folder, sizes.process_workers) as fleet:
            if PROCESSES in result.scenarios:
                await _through_processes(engine, url, folder, fleet, sizes, into)
            if {CHAIN, FAN} & set(result.scenarios):
                # One process, alone on the database: the API process is gone.
                await fleet.grow_to(1, engine, "jobs that wait for jobs")
                into += await dependencies(
                    engine, fleet, sizes, result.scenarios, result.environment
                )
            if PROCESSES not in result.scenarios:
                return
            each = f"WORKERS={sizes.process_workers}"
            for count in sizes.processes:
                plural = "es" if count > 1 else ""
                label = (
                    f"drain: {count} jobqueue worker process{plural} ({each}), "
                    f"jobs enqueued before, empty table"
                )
                await fleet.grow_to(count, engine, label)
                drained = await drain_in_processes(engine, fleet, sizes.drain_jobs, label)
                into.append(Measurement(f"drain.processes.{count}", label, drained))


async def _through_processes(
    engine: AsyncEngine,
    url: str,
    folder: Path,
    fleet: WorkerProcesses,
    sizes: Sizes,
    into: list[Measurement],
) -> None:
    """Enqueues over HTTP, pickups and waits through one worker process; the API process
    is stopped at the end, the worker process left running."""
    each = f"WORKERS={sizes.process_workers}"
    rate = f"{sizes.pickup_rate:g} jobs/s"
    async with running_api(url, folder, "starting a jobqueue api process") as api:
        await reset(engine)
        label = (
            f"enqueue: POST /jobs to a jobqueue api process, 1 job per request, "
            f"{sizes.http_clients} keep-alive clients"
        )
        stored = partial(noop_jobs, engine)
        result = await submit_over_http(api, sizes.jobs, sizes.http_clients, stored, label)
        into.append(Measurement(f"enqueue.http.c{sizes.http_clients}", label, result))
        for clients in sizes.http_batch_clients:
            await reset(engine)
            noun = "client" if clients == 1 else "clients"
            label = (
                f"enqueue: POST /jobs/batch to a jobqueue api process, "
                f"{sizes.batch:,} jobs per request, {clients} keep-alive {noun}"
            )
            result = await submit_batches_over_http(
                api, sizes.jobs, sizes.batch, clients, stored, label
            )
            into.append(Measurement(f"enqueue.http_batch.c{clients}", label, result))

        # The API process listens for jobs' ends on a connection of its own.
        await fleet.grow_to(1, engine, "pickup", besides=1)
        await reset(engine)
        label = f"pickup: POST /jobs → a jobqueue worker process ({each}), {rate}"
        async with api.connect() as connection:

            async def over_the_api(payload: JsonValue) -> UUID:
                return await over_http.submit(connection, PICKUP_TYPE, payload)

            latency = await pickup_in_process(
                over_the_api, fleet, folder, sizes.latency_samples, sizes.pickup_rate, label
            )
        into.append(Measurement("pickup.process.http", label, latency))
        into += await wait_for_endings(engine, api, fleet, sizes)

    await reset(engine)
    label = f"pickup: enqueue(engine) → a jobqueue worker process ({each}), {rate}"

    async def in_process(payload: JsonValue) -> UUID:
        new = NewJob.build(type=PICKUP_TYPE, payload=payload, registered=[PICKUP_TYPE])
        return (await jobqueue.enqueue(engine, new)).job.id

    latency = await pickup_in_process(
        in_process, fleet, folder, sizes.latency_samples, sizes.pickup_rate, label
    )
    into.append(Measurement("pickup.process.enqueue", label, latency))


def _jobqueue_package() -> str:
    """Where the measured code came from: a run against another checkout says so."""
    return str(Path(jobqueue.__file__).resolve().parent)


def _milliseconds(value: timedelta) -> float:
    return value.total_seconds() * 1000
