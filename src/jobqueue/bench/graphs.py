"""Jobs that wait for jobs (issue 29): how soon a dependent starts once the job it waited
for completed, and how fast a fan-out/fan-in runs beside as many independent jobs.

Every job is a `bench.step` (its handler returns `{"ok": true}` at once), run by one
`jobqueue worker` process listening for wake-ups, as users run it, with nothing else to
do; each graph is submitted in one transaction (`jobqueue.enqueue_graph`), and every job
must have completed once, with that result, and started after every job it waited for
had ended.

- The chain: `chain_jobs` jobs, each after the one before. A hop is a job's `started_at`
  (its claim's `now()`) less the `finished_at` of the job before it (its ending's
  `now()`, the statement whose trigger released it): that statement and its commit, the
  release's NOTIFY reaching the worker's listener, and the claim sent then. The total
  runs from the graph's commit to the last job's end.
- The fan: `fan_layers` layers of `fan_width` jobs, each after `fan_waits_for` jobs of the
  layer before (all of them by default: the most edges, and every ending of a layer then
  counts itself off every job of the next, whose rows it locks), then one job after the
  whole last layer. Alternated `ROUNDS` times with a drain of layers × width independent
  jobs of the same type (`enqueue_many`, one transaction), each reported by its median
  run. A run lasts from its commit to its last job's `finished_at`: one clock, this
  machine's (as in `waits.py`).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

import jobqueue
from jobqueue.bench import graph_shapes
from jobqueue.bench.errors import BenchError
from jobqueue.bench.jobs_table import reset, unfinished
from jobqueue.bench.progress import progress
from jobqueue.bench.results import Latency, Measurement, Throughput, median_run
from jobqueue.bench.sizes import CHAIN, FAN, Sizes
from jobqueue.bench.worker_handlers import STEP_RESULT, STEP_TYPE
from jobqueue.bench.worker_processes import WorkerProcesses
from jobqueue.domain.dependencies import Step
from jobqueue.domain.job import NewJob
from jobqueue.domain.status import LIVE

# Runs of the fan and of the independent jobs, alternated: each lasts about a second,
# which the machine's moods move more than the code does (see runner's LIMITED_ROUNDS).
ROUNDS = 3
# How often a run looks whether its last job ended: lost in a run's length, and one
# primary-key read, so nothing the server notices.
_CHECK_EVERY = 0.025
# A chain whose wake-ups were all lost would take POLL_INTERVAL (1s) per hop.
_TIMEOUT = 600.0


@dataclass(frozen=True, slots=True)
class Ran:
    """A run's jobs as they ended, in the order submitted: `(started_at, finished_at)`
    each; its throughput from the commit; how long its submission took."""

    times: list[tuple[datetime, datetime]]
    throughput: Throughput
    submit_seconds: float


async def dependencies(
    engine: AsyncEngine,
    fleet: WorkerProcesses,
    sizes: Sizes,
    scenarios: Collection[str],
    environment: dict[str, str | int | float],
) -> list[Measurement]:
    """The chain and the fan (those of `scenarios` whose size is not 0), on `fleet`'s one
    process, after an untimed run of each kind (statements prepared, plans cached on
    the worker's connections); how long their submissions took goes to `environment`."""
    new = NewJob.build(type=STEP_TYPE, default_max_attempts=3, registered=[STEP_TYPE])
    on = f"1 jobqueue worker process, WORKERS={fleet.workers}"
    chain = sizes.chain_jobs if CHAIN in scenarios else 0
    layers = sizes.fan_layers if FAN in scenarios else 0
    found: list[Measurement] = []
    if not chain and not layers:
        return found
    warm = 2 * fleet.workers
    label = "dependencies: warm-up, untimed"
    await _graph(engine, fleet, graph_shapes.chain(warm, new), label)
    await _graph(engine, fleet, graph_shapes.fan(2, warm, warm, new), label)
    await _independent(engine, fleet, warm, new, label)

    if chain:
        label = f"chain: {chain:,} jobs, each after the one before, one graph ({on})"
        ran = await _graph(engine, fleet, graph_shapes.chain(chain, new), label)
        hops = graph_shapes.hops(ran.times)
        if len(hops) >= 2:
            latency = Latency.of(hops)
            found.append(
                Measurement("graph.chain.hop", f"{label}: a job's end → the next's start", latency)
            )
        found.append(Measurement("graph.chain", f"{label}: commit → last end", ran.throughput))
        environment["chain_submit_seconds"] = ran.submit_seconds

    if layers:
        width, waits_for = sizes.fan_width, sizes.fan_waits_for
        steps = graph_shapes.fan(layers, width, waits_for, new)
        after = f"all {width}" if waits_for == width else f"{waits_for}"
        shape = (
            f"fan: {layers} layers × {width:,} jobs, each after {after} of the layer before, "
            f"then 1 after the last layer ({len(steps):,} jobs, "
            f"{graph_shapes.edges(steps):,} edges, one graph)"
        )
        alone = layers * width
        independent = f"{alone:,} independent jobs, enqueue_many() in one transaction"
        fans: list[Ran] = []
        drains: list[Throughput] = []
        for number in range(1, ROUNDS + 1):
            round_of = f"(round {number} of {ROUNDS})"
            drains.append(
                await _independent(engine, fleet, alone, new, f"{independent} {round_of}")
            )
            fans.append(await _graph(engine, fleet, steps, f"{shape} {round_of}"))
        median = f"median of {ROUNDS}, alternated ({on})"
        fan = median_run([each.throughput for each in fans])
        found.append(Measurement("graph.fan", f"{shape}, {median}", fan))
        found.append(
            Measurement("graph.independent", f"{independent}, {median}", median_run(drains))
        )
        submits = sorted(each.submit_seconds for each in fans)
        environment["fan_submit_seconds"] = submits[(len(submits) - 1) // 2]
    return found


async def _graph(
    engine: AsyncEngine, fleet: WorkerProcesses, steps: Sequence[Step], label: str
) -> Ran:
    """`steps` submitted as one graph on an emptied table, run to the end by `fleet`."""
    await _reset(engine)
    before = fleet.cpu_seconds()
    submitting = time.perf_counter()
    async with engine.begin() as connection:
        submitted = await jobqueue.enqueue_graph(connection, steps)
    committed, cpu = time.time(), time.process_time()
    submit_seconds = time.perf_counter() - submitting
    ids = [each.job.id for each in submitted]
    last = ids[-1]  # every other job is its ancestor: it ends last

    async def ended() -> bool:
        return await _ended(engine, last)

    await _until(ended, fleet, label)
    times = await _checked(engine, ids, label)
    early = graph_shapes.too_early(steps, times)
    if early:
        raise BenchError(
            f"{label}: {len(early)} jobs started before a job they wait for ended, the "
            f"first job {ids[early[0]]}"
        )
    return Ran(times, _throughput(times, committed, cpu, fleet, before), submit_seconds)


async def _independent(
    engine: AsyncEngine, fleet: WorkerProcesses, jobs: int, new: NewJob, label: str
) -> Throughput:
    """`jobs` jobs with no dependencies, enqueued in one transaction, run to the end."""
    await _reset(engine)
    before = fleet.cpu_seconds()
    async with engine.begin() as connection:
        submitted = await jobqueue.enqueue_many(connection, [new] * jobs)
    committed, cpu = time.time(), time.process_time()

    async def ended() -> bool:
        return await unfinished(engine) == 0

    await _until(ended, fleet, label)
    times = await _checked(engine, [each.job.id for each in submitted], label)
    return _throughput(times, committed, cpu, fleet, before)


async def _until(ended: Callable[[], Awaitable[bool]], fleet: WorkerProcesses, label: str) -> None:
    """Return once `ended()` says the run's jobs all ended."""
    deadline = time.monotonic() + _TIMEOUT
    async with progress(label):
        while not await ended():
            fleet.check(label)
            if time.monotonic() > deadline:
                raise BenchError(f"{label}: its jobs had not all ended after {_TIMEOUT:g}s")
            await asyncio.sleep(_CHECK_EVERY)


def _throughput(
    times: Sequence[tuple[datetime, datetime]],
    committed: float,
    cpu: float,
    fleet: WorkerProcesses,
    before: float | None,
) -> Throughput:
    last = max(finished for _, finished in times).timestamp()
    after = fleet.cpu_seconds()
    spent = None if before is None or after is None else after - before
    return Throughput(len(times), last - committed, time.process_time() - cpu, spent)


async def _reset(engine: AsyncEngine) -> None:
    """The jobs of the last run gone, and the edges' table vacuumed too: a fan leaves
    tens of thousands of dead edges, which each run would otherwise pile up."""
    await reset(engine)
    async with engine.connect() as connection:
        autocommit = await connection.execution_options(isolation_level="AUTOCOMMIT")
        await autocommit.execute(text("VACUUM ANALYZE job_dependencies"))


async def _ended(engine: AsyncEngine, job_id: UUID) -> bool:
    async with engine.connect() as connection:
        result = await connection.execute(
            text("SELECT status FROM jobs WHERE id = :id"), {"id": job_id}
        )
        status = result.scalar_one_or_none()
    return status is None or status not in {each.value for each in LIVE}


async def _checked(
    engine: AsyncEngine, ids: Sequence[UUID], label: str
) -> list[tuple[datetime, datetime]]:
    """Each of `ids`'s `(started_at, finished_at)`, in their order, once every one is
    known to have completed with one attempt and the handler's result."""
    async with engine.connect() as connection:
        result = await connection.execute(
            text(
                "SELECT id, started_at, updated_at,"
                " status = 'completed' AND attempts = 1 AND result = CAST(:result AS jsonb)"
                " FROM jobs WHERE id = ANY(:ids)"
            ),
            {"ids": list(ids), "result": json.dumps(STEP_RESULT)},
        )
        rows = {row[0]: row for row in result}
    done = [job_id for job_id in ids if job_id in rows and rows[job_id][3]]
    if len(done) != len(ids):
        raise BenchError(
            f"{label}: {len(done):,} of {len(ids):,} jobs completed once with the handler's "
            f"result {STEP_RESULT}; see the worker's log"
        )
    return [(rows[job_id][1], rows[job_id][2]) for job_id in ids]
