"""Running the real `jobqueue` command in a subprocess, for end-to-end tests."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx

from jobqueue.entrypoints.config.settings import SETTINGS

REPO_ROOT = Path(__file__).resolve().parents[2]
JOBQUEUE = Path(sys.executable).with_name("jobqueue")
STARTUP_DEADLINE = 90.0

T = TypeVar("T")

# Variables of ours the test runner may have set; a subprocess gets only what a test gives.
_OURS = {setting.env for setting in SETTINGS}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def environment(command: str | None = None, **settings: str) -> dict[str, str]:
    """The environment of a `jobqueue <command>` subprocess: ours, less any setting of
    the test runner's, plus `settings` (through PgBouncer with the suite's switch on)."""
    # Imported here: tests.support.pgbouncer uses this module's free_port.
    from tests.support.pgbouncer import service_settings

    env = {key: value for key, value in os.environ.items() if key not in _OURS}
    env["PYTHONUNBUFFERED"] = "1"
    # A worker's default metrics port is fixed (:9090): tests running in parallel would
    # fight over it. A test that wants the listener gives it a free port.
    env["METRICS_ADDR"] = "off"
    env.update(service_settings(command, settings))
    return env


def run(
    args: list[str], *, timeout: float = 120, stdin: str = "", **settings: str
) -> subprocess.CompletedProcess[str]:
    """Run `jobqueue <args>` to completion, `stdin` its standard input."""
    return subprocess.run(
        [str(JOBQUEUE), *args],
        cwd=REPO_ROOT,
        env=environment(args[0] if args else None, **settings),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@dataclass
class Service:
    """A running `jobqueue serve|api|worker`; stdout and stderr go to files, so a chatty
    process can never block on a full pipe."""

    process: subprocess.Popen[bytes]
    base_url: str
    stdout: Path
    stderr: Path

    def log(self) -> list[dict[str, Any]]:
        records = []
        for line in self.stdout.read_text(encoding="utf-8").splitlines():
            if line.strip():
                records.append(json.loads(line))
        return records

    def errors(self) -> str:
        return self.stderr.read_text(encoding="utf-8")

    def send(self, signum: signal.Signals) -> None:
        self.process.send_signal(signum)

    def wait(self, timeout: float = 90) -> int:
        return self.process.wait(timeout=timeout)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)

    def wait_until_healthy(self, within: float = 90) -> None:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"jobqueue exited with {self.process.returncode} before answering:\n"
                    f"{self.errors()}\n{self.stdout.read_text()}"
                )
            try:
                if httpx.get(f"{self.base_url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"jobqueue did not answer /healthz within {within}s")


def start(args: list[str], port: int, logs: Path, **settings: str) -> Service:
    """Start `jobqueue <args>` listening on 127.0.0.1:`port`, its output in the directory
    `logs` (a pytest tmp_path, kept for a look after a failure); does not wait for it."""
    logs.mkdir(parents=True, exist_ok=True)
    stdout, stderr = logs / f"{args[0]}.stdout.log", logs / f"{args[0]}.stderr.log"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen(
            [str(JOBQUEUE), *args],
            cwd=REPO_ROOT,
            env=environment(args[0], HTTP_ADDR=f"127.0.0.1:{port}", **settings),
            stdout=out,
            stderr=err,
        )
    return Service(process, f"http://127.0.0.1:{port}", stdout, stderr)


@contextlib.contextmanager
def serving(args: list[str], logs: Path, **settings: str) -> Iterator[Service]:
    """`jobqueue <args>` `start`ed on a free port and answering, stopped on leaving the
    block however it ends."""
    running = start(args, free_port(), logs, **settings)
    try:
        running.wait_until_healthy()
        yield running
    finally:
        running.stop()


def until(condition: Callable[[], T | None], what: str, within: float = 60) -> T:
    """What `condition` returns once it is truthy, looked at every 20 ms; fails the test
    saying `what` did not happen within `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting until {what}")


def wait_for_log(service: Service, message: str, within: float) -> None:
    deadline = time.monotonic() + within
    while not any(line["message"] == message for line in service.log()):
        if service.process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"never logged {message!r}:\n{service.errors()}")
        time.sleep(0.05)
