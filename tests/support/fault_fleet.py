"""The `jobqueue` processes a fault test starts (killed, process group and all, by the
fixture that made them), with the handlers of tests/integration/fault_handlers.py, and
the `work` jobs it gives them."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jobqueue import NewJob, enqueue
from jobqueue.adapters.postgres.database import create_engine
from tests.integration.fault_handlers import EXECUTIONS_VARIABLE, MODULE
from tests.support.fault_records import log_records
from tests.support.processes import JOBQUEUE, REPO_ROOT, Service, environment, free_port


def work_jobs(count: int, rng: random.Random, low_ms: int = 5, high_ms: int = 50) -> list[NewJob]:
    return [
        NewJob.build(type="work", payload={"ms": rng.randint(low_ms, high_ms)})
        for _ in range(count)
    ]


def enqueue_all(
    database_url: str, new_jobs: Sequence[NewJob], per_transaction: int = 500
) -> list[str]:
    """Insert `new_jobs` with `jobqueue.enqueue`, one transaction per `per_transaction`
    jobs; their ids, as strings, in order."""
    return asyncio.run(_enqueue_all(database_url, new_jobs, per_transaction))


async def _enqueue_all(
    database_url: str, new_jobs: Sequence[NewJob], per_transaction: int
) -> list[str]:
    # Not the service's application name: terminate_backends must not cut it.
    engine = create_engine(database_url, pool_size=1, application_name="jobqueue-tests")
    ids: list[str] = []
    try:
        for first in range(0, len(new_jobs), per_transaction):
            async with engine.begin() as connection:
                for new in new_jobs[first : first + per_transaction]:
                    ids.append(str((await enqueue(connection, new)).job.id))
    finally:
        await engine.dispose()
    return ids


class Fleet:
    """The `jobqueue` processes of one test, each in a session (process group) of its own
    with its output in its own directory under `logs`; `close()` (a fixture's finalizer)
    kills every group still running."""

    def __init__(self, logs: Path, executions: Path) -> None:
        self.logs = logs
        self.executions = executions
        self.services: list[Service] = []

    def start(self, command: str, name: str, **settings: str) -> Service:
        directory = self.logs / name
        directory.mkdir(parents=True, exist_ok=False)
        port = free_port()
        stdout, stderr = directory / "stdout.log", directory / "stderr.log"
        env = environment(
            command,
            HTTP_ADDR=f"127.0.0.1:{port}",
            **{EXECUTIONS_VARIABLE: str(self.executions)},
            **settings,
        )
        with stdout.open("wb") as out, stderr.open("wb") as err:
            process = subprocess.Popen(
                [str(JOBQUEUE), command, "--handlers", MODULE],
                cwd=REPO_ROOT,
                env=env,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        service = Service(process, f"http://127.0.0.1:{port}", stdout, stderr)
        self.services.append(service)
        return service

    def kill(self, service: Service) -> None:
        """SIGKILL the process group of `service` and reap it."""
        if service.process.poll() is None:
            # Only while the leader is unreaped: its id cannot belong to anyone else.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(service.process.pid, signal.SIGKILL)
        service.process.wait(timeout=30)

    def stop(self, service: Service, within: float = 60) -> int:
        """SIGTERM, as an orchestrator would; SIGKILL if it has not exited `within`."""
        if service.process.poll() is None:
            service.process.send_signal(signal.SIGTERM)
            try:
                service.process.wait(timeout=within)
            except subprocess.TimeoutExpired:
                self.kill(service)
        return service.process.returncode

    def close(self) -> None:
        for service in self.services:
            self.kill(service)

    def logs_of_all(self) -> list[dict[str, Any]]:
        return [record for service in self.services for record in log_records(service.stdout)]


def wait_for_log(service: Service, message: str, within: float) -> dict[str, Any]:
    """The first line of `service` whose message is `message`; polled until `within`."""
    deadline = time.monotonic() + within
    while True:
        for record in log_records(service.stdout):
            if record.get("message") == message:
                return record
        if service.process.poll() is not None:
            raise AssertionError(
                f"exited with {service.process.returncode} before logging {message!r}:\n"
                f"{service.errors()[-3000:]}\n{service.stdout.read_text()[-3000:]}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"did not log {message!r} within {within}s")
        time.sleep(0.05)
