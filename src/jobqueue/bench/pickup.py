"""Pickup latency: how long a job waits between `submit` returning and its handler
starting, with an idle pool that only polls, or is woken by the submitter."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Collection
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.bench.errors import BenchError
from jobqueue.bench.pools import running_pools
from jobqueue.bench.probe import StartProbe, noop_job
from jobqueue.bench.progress import progress
from jobqueue.bench.results import Latency

# Submissions arrive one at a time, at random gaps: a fixed gap could fall into step with
# the poll interval and show one phase of it instead of its whole range.
_GAP_SECONDS = (0.02, 0.06)
_SEED = 1  # the same gaps in every run and every mode
_PICKUP_TIMEOUT = 60.0


async def pickup(
    engine: AsyncEngine, samples: int, workers: int, *, wake: bool, label: str
) -> Latency:
    store = PostgresJobStore(engine)
    probe = StartProbe()
    gaps = random.Random(_SEED)
    new = noop_job()
    async with running_pools(engine, probe, 1, workers) as running:
        # Untimed: the first job opens the pool's connections and prepares its statements.
        first = (await store.submit(new)).job
        running.wake()
        await _started(probe, [first.id], label)

        submitted: dict[UUID, float] = {}
        async with progress(label, samples) as shown:
            for _ in range(samples):
                job = (await store.submit(new)).job
                submitted[job.id] = time.perf_counter()
                if wake:
                    running.wake()
                shown.advance()
                await asyncio.sleep(gaps.uniform(*_GAP_SECONDS))
            await _started(probe, submitted.keys(), label)
    # A claim can only see a committed job, but the pool may start it before this task
    # resumes after the commit; such a pickup took no time at all.
    return Latency.of([max(0.0, probe.started[job_id] - at) for job_id, at in submitted.items()])


async def _started(probe: StartProbe, job_ids: Collection[UUID], label: str) -> None:
    try:
        async with asyncio.timeout(_PICKUP_TIMEOUT):
            await probe.wait_for(job_ids)
    except TimeoutError:
        missing = len(set(job_ids) - probe.started.keys())
        raise BenchError(
            f"{label}: {missing} of {len(job_ids)} jobs not started after {_PICKUP_TIMEOUT:g}s"
        ) from None
