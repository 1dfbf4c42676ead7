"""Worker start-up: the wall time from spawning `jobqueue worker` to its first handler call.

Each run leaves one due job in an otherwise empty table, spawns `python -m jobqueue
worker --handlers bench.startup_handlers` with METRICS_ADDR=off and AUTO_MIGRATE=false
(no HTTP listener, no migration: what the worker needs to import and do is all that is
timed), and reads the moment the handler was called from the file its job names. The
worker is then stopped with SIGTERM and awaited before the next run.

The clock is `time.time()` on both sides: one machine, one clock, and unlike
`perf_counter` it means the same in two processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

import bench
import jobqueue
from bench.database import BenchError
from bench.progress import progress
from bench.results import StartupTime
from bench.startup_handlers import JOB_TYPE
from bench.table import reset

HANDLER_MODULE = "bench.startup_handlers"
# The directory holding the `bench` package, put on the worker's PYTHONPATH so that it can
# import the handler module wherever the benchmark was started from.
_BENCH_PARENT = Path(bench.__file__).resolve().parents[1]
_START_TIMEOUT = 120.0
_STOP_TIMEOUT = 60.0
# How often to look for the handler's file; the figure is the time the handler wrote
# down, so this only bounds how soon a run notices, not what it measures.
_LOOK_EVERY = 0.01
_LOG_TAIL_LINES = 30


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


def worker_command() -> list[str]:
    return [sys.executable, "-m", "jobqueue", "worker", "--handlers", HANDLER_MODULE]


def worker_environment(url: str) -> dict[str, str]:
    """This process's environment, on the scratch database, with no listener and no
    migration, and the handler module importable."""
    environment = dict(os.environ)
    environment.pop("JOBQUEUE_HANDLERS", None)  # --handlers replaces it anyway
    python_path = [str(_BENCH_PARENT)]
    if environment.get("PYTHONPATH"):
        python_path.append(environment["PYTHONPATH"])
    environment.update(
        DATABASE_URL=url,
        METRICS_ADDR="off",
        AUTO_MIGRATE="false",
        PYTHONPATH=os.pathsep.join(python_path),
    )
    return environment


async def _spawn_to_first_call(
    engine: AsyncEngine, url: str, folder: Path, run: str, label: str
) -> float:
    await reset(engine)
    marker = folder / f"started-{run}.json"
    await _enqueue(engine, marker)
    log = folder / f"worker-{run}.log"
    command, environment = worker_command(), worker_environment(url)
    with log.open("wb") as output:
        # The worker's working directory holds only this run's files, so nothing in the
        # directory the benchmark was started from can shadow a module the worker imports.
        spawned = time.time()
        process = await asyncio.create_subprocess_exec(
            *command,
            cwd=folder,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        record = await _handler_record(process, marker, log, label)
    except BaseException:
        await _stop(process)
        raise
    exit_code = await _stop(process)
    if exit_code != 0:
        raise BenchError(
            f"{label}: the worker exited with {exit_code} after SIGTERM:\n{_tail(log)}"
        )
    _check_same_package(record, label)
    called = record["called"]
    if not isinstance(called, float):
        raise BenchError(f"{label}: the handler wrote an unreadable record: {record!r}")
    return called - spawned


async def _enqueue(engine: AsyncEngine, marker: Path) -> None:
    """One due job for the handler module; straight SQL, as the table's seeds are."""
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO jobs (type, payload, max_attempts)"
                " VALUES (:type, CAST(:payload AS jsonb), 1)"
            ),
            {"type": JOB_TYPE, "payload": json.dumps({"path": str(marker)})},
        )


async def _handler_record(
    process: asyncio.subprocess.Process, marker: Path, log: Path, label: str
) -> dict[str, object]:
    deadline = time.monotonic() + _START_TIMEOUT
    while (record := await asyncio.to_thread(_read_record, marker)) is None:
        if process.returncode is not None:
            raise BenchError(
                f"{label}: the worker exited with {process.returncode} before its first "
                f"job started:\n{_tail(log)}"
            )
        if time.monotonic() > deadline:
            raise BenchError(
                f"{label}: the worker's first job had not started after "
                f"{_START_TIMEOUT:g}s:\n{_tail(log)}"
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


async def _stop(process: asyncio.subprocess.Process) -> int:
    """SIGTERM, then the exit code; a worker that does not stop in time is killed."""
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
    try:
        async with asyncio.timeout(_STOP_TIMEOUT):
            return await process.wait()
    except TimeoutError:
        process.kill()
        return await process.wait()


def _check_same_package(record: dict[str, object], label: str) -> None:
    """The worker must have run the `jobqueue` this process imported: that is the code
    the report says it measured."""
    ran = record.get("jobqueue")
    if not isinstance(ran, str) or Path(ran).resolve() != Path(jobqueue.__file__).resolve():
        raise BenchError(
            f"{label}: the worker ran jobqueue from {ran!r}, not {jobqueue.__file__!r} as the "
            "benchmark does"
        )


def _tail(log: Path) -> str:
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    return "\n".join(lines[-_LOG_TAIL_LINES:])
