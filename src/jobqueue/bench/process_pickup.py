"""Pickup latency across processes: jobs submitted by this process (in-process `enqueue`,
or POST /jobs to the API process) one at a time at about `pickup_rate` a second, and
started by a separate `jobqueue worker` process woken by NOTIFY, the product's own path.

The worker's handler appends each job's start time (`time.time()`) to a file the job
names; the latency of a job is that time minus the moment its submission returned here.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from uuid import UUID

from jobqueue.bench.errors import BenchError
from jobqueue.bench.progress import progress
from jobqueue.bench.results import Latency
from jobqueue.bench.worker_processes import WorkerProcesses
from jobqueue.domain.fields import JsonValue

# Submits one pickup job with this payload; returns its id once the submission returned.
Submit = Callable[[JsonValue], Awaitable[UUID]]

_SEED = 1  # the same gaps in every run and every mode
_PICKUP_TIMEOUT = 60.0
_LOOK_EVERY = 0.01


async def pickup_in_process(
    submit: Submit, fleet: WorkerProcesses, folder: Path, samples: int, rate: float, label: str
) -> Latency:
    starts = folder / f"starts-{time.monotonic_ns()}.log"
    payload: JsonValue = {"path": str(starts)}
    # Submissions arrive at random gaps of 0.5 to 1.5 times the mean: a fixed gap could
    # fall into step with a periodic task in the worker and show one phase of it.
    gaps = random.Random(_SEED)
    mean = 1 / rate
    # Untimed: the first job opens the connections on both sides and prepares statements.
    first = await submit(payload)
    await _started(starts, {first}, fleet, label)

    submitted: dict[UUID, float] = {}
    async with progress(label, samples) as shown:
        for _ in range(samples):
            job_id = await submit(payload)
            submitted[job_id] = time.time()
            shown.advance()
            await asyncio.sleep(gaps.uniform(0.5 * mean, 1.5 * mean))
        started = await _started(starts, set(submitted), fleet, label)
    # The worker may start a job before this task resumes after the submission returned;
    # such a pickup took no time at all.
    return Latency.of([max(0.0, started[job_id] - at) for job_id, at in submitted.items()])


async def _started(
    starts: Path, job_ids: set[UUID], fleet: WorkerProcesses, label: str
) -> dict[UUID, float]:
    deadline = time.monotonic() + _PICKUP_TIMEOUT
    while True:
        found = await asyncio.to_thread(read_starts, starts)
        missing = job_ids - found.keys()
        if not missing:
            return found
        fleet.check(label)
        if time.monotonic() > deadline:
            raise BenchError(
                f"{label}: {len(missing)} of {len(job_ids)} jobs not started after "
                f"{_PICKUP_TIMEOUT:g}s"
            )
        await asyncio.sleep(_LOOK_EVERY)


def read_starts(path: Path) -> dict[UUID, float]:
    """The `<job id> <time>` lines the pickup handler appended; a last line still being
    written (no newline yet) is left for the next read."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    started = {}
    for line in text.split("\n")[:-1]:
        job_id, called = line.split()
        started[UUID(job_id)] = float(called)
    return started
