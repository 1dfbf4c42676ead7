"""Worker start-up: the wall time from spawning `jobqueue worker` to its first handler call.

Each run leaves one due job in an otherwise empty table, spawns `python -m jobqueue
worker` with the benchmark's handler module, METRICS_ADDR=off and AUTO_MIGRATE=false (no
HTTP listener, no migration: what the worker needs to import and do is all that is
timed), and reads the moment the handler was called from the file its job names. The
worker is then stopped with SIGTERM and awaited before the next run.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

import jobqueue
from jobqueue.bench import processes
from jobqueue.bench.errors import BenchError
from jobqueue.bench.jobs_table import reset
from jobqueue.bench.processes import Spawned
from jobqueue.bench.progress import progress
from jobqueue.bench.results import StartupTime
from jobqueue.bench.worker_handlers import STARTUP_TYPE

_START_TIMEOUT = 120.0
# How often to look for the handler's file; the figure is the time the handler wrote
# down, so this only bounds how soon a run notices, not what it measures.
_LOOK_EVERY = 0.01


async def worker_startup(engine: AsyncEngine, url: str, runs: int, label: str) -> StartupTime:
    """Spawn → first handler call of `runs` workers, one at a time, on the database at
    `url` (which `engine` is connected to); the table is emptied before each run.

    One untimed spawn goes first: it compiles whatever bytecode is missing and brings the
    modules into the page cache, which a worker's restarts on a host do not pay again.
    """
    with tempfile.TemporaryDirectory(prefix="jobqueue-bench-startup-") as directory:
        folder = Path(directory)
        async with progress(f"{label}: untimed warm-up"):
            await _spawn_to_first_call(engine, url, folder, "warm-up", label)
        seconds = []
        async with progress(label, runs) as shown:
            for number in range(1, runs + 1):
                seconds.append(await _spawn_to_first_call(engine, url, folder, str(number), label))
                shown.advance()
    return StartupTime.of(seconds)


async def _spawn_to_first_call(
    engine: AsyncEngine, url: str, folder: Path, run: str, label: str
) -> float:
    await reset(engine)
    marker = folder / f"started-{run}.json"
    await _enqueue(engine, marker)
    worker = await processes.spawn(
        f"the worker of start-up run {run}",
        processes.command("worker"),
        processes.environment(url, METRICS_ADDR="off"),
        folder,
        f"worker-{run}.log",
    )
    try:
        record = await _handler_record(worker, marker, label)
    except BaseException:
        await processes.stop(worker.process)
        raise
    await worker.stop(label)
    _check_same_package(record, label)
    called = record["called"]
    if not isinstance(called, float):
        raise BenchError(f"{label}: the handler wrote an unreadable record: {record!r}")
    return called - worker.spawned_at


async def _enqueue(engine: AsyncEngine, marker: Path) -> None:
    """One due job for the handler module; straight SQL, as the table's seeds are."""
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO jobs (type, payload, max_attempts)"
                " VALUES (:type, CAST(:payload AS jsonb), 1)"
            ),
            {"type": STARTUP_TYPE, "payload": json.dumps({"path": str(marker)})},
        )


async def _handler_record(worker: Spawned, marker: Path, label: str) -> dict[str, object]:
    deadline = time.monotonic() + _START_TIMEOUT
    while (record := await asyncio.to_thread(_read_record, marker)) is None:
        worker.check(f"{label}, before its first job started")
        if time.monotonic() > deadline:
            raise BenchError(
                f"{label}: the worker's first job had not started after "
                f"{_START_TIMEOUT:g}s:\n{worker.tail()}"
            )
        await asyncio.sleep(_LOOK_EVERY)
    if not isinstance(record, dict):
        raise BenchError(f"{label}: the handler wrote an unreadable record: {record!r}")
    return record


def _read_record(marker: Path) -> object | None:
    """What the handler wrote, or None before it has (it renames a whole file into place)."""
    try:
        record: object = json.loads(marker.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    return record


def _check_same_package(record: dict[str, object], label: str) -> None:
    """The worker must have run the `jobqueue` this process imported: that is the code
    the report says it measured."""
    ran = record.get("jobqueue")
    if not isinstance(ran, str) or Path(ran).resolve() != Path(jobqueue.__file__).resolve():
        raise BenchError(
            f"{label}: the worker ran jobqueue from {ran!r}, not {jobqueue.__file__!r} as the "
            "benchmark does"
        )
