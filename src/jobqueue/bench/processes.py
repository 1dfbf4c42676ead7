"""The `jobqueue worker` and `jobqueue api` processes the scenarios start: command,
environment, log, CPU time, and stopping them.

Each runs this interpreter's `python -m jobqueue`, so it runs the `jobqueue` this process
imported, with the benchmark's handler module, in a working directory of its own (nothing
in the directory the benchmark was started from can shadow a module it imports).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from jobqueue.adapters.telemetry.tracing_config import TRACING_ENVIRONMENT
from jobqueue.bench.errors import BenchError
from jobqueue.entrypoints.config.settings import SETTINGS

HANDLER_MODULE = "jobqueue.bench.worker_handlers"
_STOP_TIMEOUT = 60.0
_LOG_TAIL_LINES = 30
# Every variable the service reads: the caller's shell may set any of them, and the
# processes measured must run with the settings the report shows, nothing else.
_SERVICE_VARIABLES = {row.env for row in SETTINGS} | {name for name, _, _ in TRACING_ENVIRONMENT}


def command(name: Literal["worker", "api"]) -> list[str]:
    return [sys.executable, "-m", "jobqueue", name, "--handlers", HANDLER_MODULE]


def environment(url: str, **settings: str) -> dict[str, str]:
    """This process's environment less every service and OpenTelemetry variable, on the
    database at `url`, which the benchmark has migrated already (AUTO_MIGRATE=false), with
    `settings` on top.

    LOG_LEVEL=WARNING, as in the in-process runs (and the peer comparison): at INFO a
    worker writes two JSON lines per job and the API one per request, which would be most
    of what a no-op job costs."""
    inherited = {
        name: value
        for name, value in os.environ.items()
        if name not in _SERVICE_VARIABLES and not name.startswith("OTEL_")
    }
    return {
        **inherited,
        "DATABASE_URL": url,
        "AUTO_MIGRATE": "false",
        "LOG_LEVEL": "WARNING",
        **settings,
    }


@dataclass(slots=True)
class Spawned:
    """A running `jobqueue` process whose output goes to `log`."""

    name: str
    process: asyncio.subprocess.Process
    log: Path
    spawned_at: float  # time.time()

    def check(self, label: str) -> None:
        """Raise if it exited: a scenario would otherwise wait for it forever."""
        if self.process.returncode is not None:
            raise BenchError(
                f"{label}: {self.name} exited with {self.process.returncode}:\n{self.tail()}"
            )

    def cpu_seconds(self) -> float | None:
        """User plus system CPU time so far, from /proc; None where there is no /proc."""
        return cpu_seconds_of(self.process.pid)

    async def stop(self, label: str) -> None:
        """SIGTERM, and a clean exit expected; one that does not stop in time is killed."""
        exit_code = await stop(self.process)
        if exit_code != 0:
            raise BenchError(
                f"{label}: {self.name} exited with {exit_code} after SIGTERM:\n{self.tail()}"
            )

    def tail(self) -> str:
        lines = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        return "\n".join(lines[-_LOG_TAIL_LINES:])


async def spawn(
    name: str, argv: list[str], env: dict[str, str], folder: Path, log_name: str
) -> Spawned:
    log = folder / log_name
    with log.open("wb") as output:
        spawned_at = time.time()
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    return Spawned(name, process, log, spawned_at)


async def stop(process: asyncio.subprocess.Process) -> int:
    """SIGTERM, then the exit code; a process that does not stop in time is killed."""
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
    try:
        async with asyncio.timeout(_STOP_TIMEOUT):
            return await process.wait()
    except TimeoutError:
        process.kill()
        return await process.wait()


def cpu_seconds_of(pid: int) -> float | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return None
    # The command name in parentheses may hold spaces; the fields after it are fixed:
    # state is field 3, utime 14 and stime 15 (proc(5)), in clock ticks.
    fields = stat.rsplit(")", 1)[1].split()
    ticks = int(fields[14 - 3]) + int(fields[15 - 3])
    return ticks / os.sysconf("SC_CLK_TCK")


def total_cpu_seconds(processes: list[Spawned]) -> float | None:
    readings = [each.cpu_seconds() for each in processes]
    if any(reading is None for reading in readings):
        return None
    return sum(reading for reading in readings if reading is not None)
