"""`jobqueue worker` processes on the scratch database, added a few at a time and all
stopped at the end, and drains of pre-enqueued no-op jobs through them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue import NewJob, enqueue_many
from jobqueue.bench import processes
from jobqueue.bench.errors import BenchError
from jobqueue.bench.jobs_table import drained, listening_processes, reset, unfinished
from jobqueue.bench.processes import Spawned, total_cpu_seconds
from jobqueue.bench.progress import ProgressLine, progress
from jobqueue.bench.results import Stopwatch, Throughput
from jobqueue.bench.worker_handlers import NOOP_TYPE

_READY_TIMEOUT = 120.0
_LOOK_EVERY = 0.05
# As the in-process drain: fine enough to be lost in the run's length, cheap for the server.
_CHECK_EVERY = 0.025
_DRAIN_TIMEOUT = 600.0


def worker_settings(workers: int) -> dict[str, str]:
    """What each worker process is given besides the database: the settings the report
    names. No metrics listener (several processes share one host) and no retention pass
    (its deletes are no part of a drain, and could meet a table with a history)."""
    return {
        "WORKERS": str(workers),
        "METRICS_ADDR": "off",
        "RETENTION_COMPLETED": "0",
        "RETENTION_FAILED": "0",
    }


class WorkerProcesses:
    def __init__(self, url: str, folder: Path, workers: int) -> None:
        self._url = url
        self._folder = folder
        self.workers = workers  # WORKERS of each process
        self.running: list[Spawned] = []

    async def grow_to(
        self, count: int, engine: AsyncEngine, label: str, *, besides: int = 0
    ) -> None:
        """Start processes until `count` run, and return once each is listening for new
        jobs: a drain that started before would time some processes' start-up too.
        `besides`: the listening connections of other processes on the database (an API
        process listens for jobs' ends), counted with the workers' own."""
        while len(self.running) < count:
            number = len(self.running) + 1
            self.running.append(
                await processes.spawn(
                    f"worker process {number}",
                    processes.command("worker"),
                    processes.environment(self._url, **worker_settings(self.workers)),
                    self._folder,
                    f"worker-{number}.log",
                )
            )
        deadline = time.monotonic() + _READY_TIMEOUT
        async with progress(f"{label}: starting {count} worker process(es)"):
            while await listening_processes(engine) < count + besides:
                self.check(label)
                if time.monotonic() > deadline:
                    raise BenchError(
                        f"{label}: {count} worker processes were not all listening after "
                        f"{_READY_TIMEOUT:g}s:\n{self.running[-1].tail()}"
                    )
                await asyncio.sleep(_LOOK_EVERY)

    def check(self, label: str) -> None:
        for each in self.running:
            each.check(label)

    def cpu_seconds(self) -> float | None:
        return total_cpu_seconds(self.running)

    async def stop(self, label: str) -> None:
        # All at once: each takes about as long to shut down as the others.
        results = await asyncio.gather(
            *(each.stop(label) for each in self.running), return_exceptions=True
        )
        self.running = []
        for result in results:
            if isinstance(result, BaseException):
                raise result


@asynccontextmanager
async def worker_processes(url: str, folder: Path, workers: int) -> AsyncIterator[WorkerProcesses]:
    """None running on entry (`grow_to` starts them); all stopped on exit."""
    fleet = WorkerProcesses(url, folder, workers)
    try:
        yield fleet
    except BaseException:
        await asyncio.gather(*(processes.stop(each.process) for each in fleet.running))
        raise
    await fleet.stop("stopping the worker processes")


async def drain_in_processes(
    engine: AsyncEngine, fleet: WorkerProcesses, jobs: int, label: str
) -> Throughput:
    """`jobs` no-op jobs enqueued in one transaction while every process waits on its
    LISTEN, timed from that commit (which wakes them all) until none is left; then every
    job must have completed once, with attempts = 1."""
    # Untimed: the processes added last prepare their statements and open their pools.
    await reset(engine)
    await _drain(engine, fleet, 10 * len(fleet.running) * fleet.workers, None, label)
    await reset(engine)
    async with progress(label, jobs) as shown:
        result = await _drain(engine, fleet, jobs, shown, label)
    problem = (await drained(engine)).problem(jobs)
    if problem is not None:
        raise BenchError(f"{label}: {problem}; see the worker logs above")
    return result


async def _drain(
    engine: AsyncEngine,
    fleet: WorkerProcesses,
    jobs: int,
    shown: ProgressLine | None,
    label: str,
) -> Throughput:
    new = NewJob.build(type=NOOP_TYPE, default_max_attempts=3, registered=[NOOP_TYPE])
    before = fleet.cpu_seconds()
    async with engine.begin() as connection:
        await enqueue_many(connection, [new] * jobs)
        # The jobs become visible, and the NOTIFY is delivered, at the commit just after.
        stopwatch = Stopwatch()
    deadline = time.monotonic() + _DRAIN_TIMEOUT
    while (left := await unfinished(engine)) > 0:
        fleet.check(label)
        if shown is not None:
            shown.update(jobs - left)
        if time.monotonic() > deadline:
            raise BenchError(f"{label}: {left:,} jobs left after {_DRAIN_TIMEOUT:g}s")
        await asyncio.sleep(_CHECK_EVERY)
    after = fleet.cpu_seconds()
    spent = None if before is None or after is None else after - before
    return stopwatch.throughput(jobs, spent)
