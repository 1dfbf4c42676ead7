"""Drain throughput: worker pools running no-op jobs until none is left."""

from __future__ import annotations

import asyncio

from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.bench.errors import BenchError
from jobqueue.bench.jobs_table import drained, seed_pending, unfinished
from jobqueue.bench.pools import running_pools
from jobqueue.bench.probe import StartProbe
from jobqueue.bench.progress import progress
from jobqueue.bench.results import Stopwatch, Throughput

# How often the drain checks whether it is done: fine enough that the check's delay is
# lost in the run's length, coarse enough to cost the database nothing noticeable.
_CHECK_EVERY = 0.025


async def drain(
    engine: AsyncEngine, jobs: int, pools: int, workers: int, label: str, keys: int = 0
) -> Throughput:
    """Seed `jobs` pending no-op jobs (over `keys` partition keys, if given), then time
    `pools` pools of `workers` workers each (sharing one engine, as in one process) until
    every job is completed."""
    await seed_pending(engine, jobs, keys)
    async with progress(label, jobs) as shown:
        stopwatch = Stopwatch()
        async with running_pools(engine, StartProbe(), pools, workers) as running:
            while (left := await unfinished(engine)) > 0:
                running.check()
                shown.update(jobs - left)
                await asyncio.sleep(_CHECK_EVERY)
            # Taken before the pools stop: their shutdown is not part of the drain.
            result = stopwatch.throughput(jobs)
            shown.update(jobs)
    problem = (await drained(engine)).problem(jobs)
    if problem is not None:
        raise BenchError(f"{label}: {problem}; see the log above")
    return result
