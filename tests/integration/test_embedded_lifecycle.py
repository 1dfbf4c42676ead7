"""The embedded PostgreSQL of real `jobqueue serve` processes: it always stops with the
last live process, whoever was killed before, and within seconds when the last one is
killed itself (its watchdog), `make run` included.

Each test gives its processes a data directory of its own (not the session's server),
and kills whatever postgres of that directory a failed test leaves behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from jobqueue.adapters.postgres.embedded_handles import WATCHDOG_FILE, process_identity
from tests.support.processes import JOBQUEUE, REPO_ROOT, Service, environment, free_port, start

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not Path("/proc/self/stat").exists(), reason="finds the server's processes in /proc"
    ),
]

STARTUP = 180.0  # the first start of a data directory runs initdb and the migrations
ORPHANED_WITHIN = 10.0  # the bound on a server outliving its last process: "a few seconds"


def postgres_of(data_dir: Path) -> list[int]:
    """Live (not zombie) postgres processes of `data_dir`: the postmaster names it on its
    command line, and every process of the server works in it."""
    data_dir = data_dir.resolve()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != "postgres":
                continue
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            in_dir = (entry / "cwd").resolve() == data_dir
        except OSError:
            continue
        if in_dir or str(data_dir) in cmdline:
            found.append(int(entry.name))
    return found


def wait_until(condition: Callable[[], bool], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not within {within}s")
        time.sleep(0.05)


def postmaster_pid(data_dir: Path) -> int:
    return int((data_dir / "postmaster.pid").read_text().splitlines()[0])


def handle_pids(data_dir: Path) -> list[int]:
    values: list[int] = json.loads((data_dir / ".handle_pids.json").read_text())
    return values


def watchdog_pid(data_dir: Path) -> int:
    return int((data_dir / WATCHDOG_FILE).read_text())


def alive(pid: int) -> bool:
    return process_identity(pid) is not None  # a zombie is not


def messages(service: Service) -> list[str]:
    return [str(line["message"]) for line in service.log()]


class Launcher:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.data_dir = tmp_path / "pgdata"
        self.services: list[Service] = []

    def serve(self, name: str) -> Service:
        service = start(
            ["serve"], free_port(), self.tmp_path / name, JOBQUEUE_DATA_DIR=str(self.data_dir)
        )
        self.services.append(service)
        return service

    def clean_up(self) -> None:
        for service in self.services:
            if service.process.poll() is None:
                service.process.kill()
                service.process.wait(timeout=30)
        # The watchdog stops the server of processes killed here, as it should.
        with contextlib.suppress(AssertionError):
            wait_until(lambda: not postgres_of(self.data_dir), ORPHANED_WITHIN, "")
        leftovers = postgres_of(self.data_dir)
        for pid in leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not postgres_of(self.data_dir), 30, "the leftover postgres exited")
        assert not leftovers, f"postgres processes {leftovers} were left running (now killed)"


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    launched = Launcher(tmp_path)
    try:
        yield launched
    finally:
        launched.clean_up()


def interrupt(service: Service) -> None:
    """Ctrl-C, and the graceful exit that must follow."""
    service.send(signal.SIGINT)
    assert service.wait(timeout=120) == 0, service.errors()


def test_after_a_sigkill_of_serve_and_its_watchdog_the_next_serve_stops_the_server(
    launcher: Launcher,
) -> None:
    first = launcher.serve("first")
    first.wait_until_healthy(within=STARTUP)
    server = postmaster_pid(launcher.data_dir)
    watchdog = watchdog_pid(launcher.data_dir)
    os.kill(watchdog, signal.SIGKILL)
    first.send(signal.SIGKILL)
    assert first.wait(timeout=30) == -signal.SIGKILL
    # What would keep the server alive for ever: the dead PID stays in the wheel's file.
    assert first.process.pid in handle_pids(launcher.data_dir)
    assert server in postgres_of(launcher.data_dir)

    second = launcher.serve("second")
    second.wait_until_healthy(within=STARTUP)
    assert postmaster_pid(launcher.data_dir) == server  # attached, not restarted
    assert watchdog_pid(launcher.data_dir) != watchdog  # and watched again
    assert alive(watchdog_pid(launcher.data_dir))
    interrupt(second)

    wait_until(lambda: not postgres_of(launcher.data_dir), 10, "the server stopped")
    log = second.log()
    [pruned] = [line for line in log if line["message"].startswith("pruned the PIDs")]
    assert pruned["pids"] == [first.process.pid]
    assert "stopped the embedded PostgreSQL" in messages(second)
    assert not any(message.startswith("left the embedded") for message in messages(second))


def test_of_two_serves_the_first_to_stop_leaves_the_server_to_the_other(
    launcher: Launcher,
) -> None:
    first = launcher.serve("first")
    first.wait_until_healthy(within=STARTUP)
    second = launcher.serve("second")
    second.wait_until_healthy(within=STARTUP)
    server = postmaster_pid(launcher.data_dir)

    interrupt(first)

    [left] = [line for line in first.log() if line["message"].startswith("left the embedded")]
    assert left["message"] == "left the embedded PostgreSQL to 1 other process"
    assert left["other_pids"] == [second.process.pid]
    assert server in postgres_of(launcher.data_dir)
    assert httpx.get(f"{second.base_url}/readyz", timeout=10).status_code == 200

    interrupt(second)

    wait_until(lambda: not postgres_of(launcher.data_dir), 10, "the server stopped")
    assert "stopped the embedded PostgreSQL" in messages(second)


def test_a_server_killed_with_its_serve_is_started_again_and_stopped(
    launcher: Launcher,
) -> None:
    first = launcher.serve("first")
    first.wait_until_healthy(within=STARTUP)
    server = postmaster_pid(launcher.data_dir)
    first.send(signal.SIGKILL)
    os.kill(server, signal.SIGKILL)
    assert first.wait(timeout=30) == -signal.SIGKILL
    # Its postmaster.pid stays behind, naming a dead (for a while, zombie) process.
    assert (launcher.data_dir / "postmaster.pid").exists()

    second = launcher.serve("second")
    second.wait_until_healthy(within=STARTUP)
    assert postmaster_pid(launcher.data_dir) != server
    interrupt(second)

    wait_until(lambda: not postgres_of(launcher.data_dir), 10, "the server stopped")
    assert "stopped the embedded PostgreSQL" in messages(second)


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            # The parent is the 2nd field after the command name (which may hold spaces).
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            continue
        if entry.name.isdigit() and parent == pid:
            found.append(int(entry.name))
    return found


@pytest.fixture
def make_run(launcher: Launcher) -> Iterator[Service]:
    """`make run` as a user types it, in a process group of its own (a terminal's job),
    on the test's data directory; the venv is the one running the tests, not remade."""
    venv = JOBQUEUE.parent.parent
    port = free_port()
    logs = launcher.tmp_path / "make"
    logs.mkdir()
    env = environment(
        "serve", HTTP_ADDR=f"127.0.0.1:{port}", JOBQUEUE_DATA_DIR=str(launcher.data_dir)
    )
    for variable in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL"):  # when the tests run under make
        env.pop(variable, None)
    with (logs / "stdout.log").open("wb") as out, (logs / "stderr.log").open("wb") as err:
        process = subprocess.Popen(
            ["make", "--no-print-directory", "-o", f"{venv}/.installed", f"VENV={venv}", "run"],
            cwd=REPO_ROOT,
            env=env,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
    service = Service(process, f"http://127.0.0.1:{port}", logs / "stdout.log", logs / "stderr.log")
    try:
        service.wait_until_healthy(within=STARTUP)
        yield service
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


def assert_no_postgres_within_seconds(data_dir: Path, watchdog: int) -> None:
    wait_until(lambda: not postgres_of(data_dir), ORPHANED_WITHIN, "the server stopped")
    wait_until(lambda: not alive(watchdog), ORPHANED_WITHIN, "the watchdog exited")


def test_a_sigkill_of_make_runs_process_group_leaves_no_postgres(
    launcher: Launcher, make_run: Service
) -> None:
    assert postgres_of(launcher.data_dir)
    watchdog = watchdog_pid(launcher.data_dir)

    os.killpg(make_run.process.pid, signal.SIGKILL)
    assert make_run.wait(timeout=30) == -signal.SIGKILL

    assert_no_postgres_within_seconds(launcher.data_dir, watchdog)
    assert "stopping it" in (launcher.data_dir / "log").read_text()


def test_a_sigkill_of_the_serve_under_make_run_alone_leaves_no_postgres(
    launcher: Launcher, make_run: Service
) -> None:
    [serve] = children_of(make_run.process.pid)
    watchdog = watchdog_pid(launcher.data_dir)
    assert postgres_of(launcher.data_dir)

    os.kill(serve, signal.SIGKILL)
    assert make_run.wait(timeout=30) != 0  # make reports its recipe's death

    assert_no_postgres_within_seconds(launcher.data_dir, watchdog)


def test_of_two_serves_killing_one_leaves_the_server_to_the_other(launcher: Launcher) -> None:
    first = launcher.serve("first")
    first.wait_until_healthy(within=STARTUP)
    second = launcher.serve("second")
    second.wait_until_healthy(within=STARTUP)
    server = postmaster_pid(launcher.data_dir)
    watchdog = watchdog_pid(launcher.data_dir)

    first.send(signal.SIGKILL)
    assert first.wait(timeout=30) == -signal.SIGKILL
    # The watchdog has looked since: it pruned the dead PID, and kept the server.
    wait_until(
        lambda: first.process.pid not in handle_pids(launcher.data_dir),
        ORPHANED_WITHIN,
        "the watchdog pruned the killed serve",
    )
    assert handle_pids(launcher.data_dir) == [second.process.pid]
    assert server in postgres_of(launcher.data_dir)
    assert alive(watchdog)
    assert httpx.get(f"{second.base_url}/readyz", timeout=10).status_code == 200

    second.send(signal.SIGKILL)
    assert second.wait(timeout=30) == -signal.SIGKILL
    assert_no_postgres_within_seconds(launcher.data_dir, watchdog)
