"""Pruning the embedded server's handle file, and clearing a dead server's lock files.

No PostgreSQL here: handle files are written by hand, and the "processes" are the test
itself, children that have exited (reaped or zombies), and `sleep` started under the
name `postgres` in a fake data directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobqueue.adapters.postgres.embedded_handles import (
    HANDLE_FILE,
    IDENTITY_FILE,
    Handles,
    live_handles,
    process_identity,
    server_processes,
)
from jobqueue.adapters.postgres.embedded_server import clear_stale_postmaster

linux_only = pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="reads the process table in /proc"
)

ME = os.getpid()


def table(**processes: str | None) -> dict[int, str | None]:
    return {int(pid.removeprefix("p")): token for pid, token in processes.items()}


# --- live_handles: the rule, on a made-up process table -----------------------------


def test_pids_of_processes_that_are_gone_are_dropped() -> None:
    processes = table(p10="boot:1", p11=None, p12="boot:3")

    assert live_handles([10, 11, 12, 13], {}, processes.get) == [10, 12]


def test_a_pid_now_held_by_another_process_is_dropped() -> None:
    processes = table(p10="boot:100", p11="boot:200")
    recorded = {10: "boot:100", 11: "boot:150"}  # 11 was registered by an earlier process

    assert live_handles([10, 11], recorded, processes.get) == [10]


def test_a_pid_nobody_recorded_counts_while_its_process_lives() -> None:
    # Added by a process that used the wheel without us: existence is all we can check.
    processes = table(p10="boot:100")

    assert live_handles([10], {}, processes.get) == [10]


def test_without_a_process_identity_a_live_pid_is_kept() -> None:
    # No /proc (not Linux): alive is known, identity is not.
    processes = table(p10="")

    assert live_handles([10], {10: "boot:1"}, processes.get) == [10]


def test_a_pid_listed_twice_counts_once() -> None:
    processes = table(p10="boot:1")

    assert live_handles([10, 10], {}, processes.get) == [10]


# --- Handles: reading and rewriting the files ---------------------------------------


def handles_in(directory: Path, pids: object, **processes: str | None) -> Handles:
    (directory / HANDLE_FILE).write_text(json.dumps(pids))
    return Handles(directory, identity=table(**processes).get)


def on_disk(directory: Path) -> list[int]:
    values: list[int] = json.loads((directory / HANDLE_FILE).read_text())
    return values


def test_pruning_rewrites_the_wheels_file_with_the_live_pids_only(tmp_path: Path) -> None:
    handles = handles_in(tmp_path, [10, 11, 12], p10="b:1", p12="b:3")

    assert handles.prune() == [10, 12]
    assert on_disk(tmp_path) == [10, 12]


def test_pruning_forgets_the_identities_of_pruned_pids(tmp_path: Path) -> None:
    handles = handles_in(tmp_path, [10], p10="b:1", p11="b:2")
    handles.remember(10)
    handles.remember(11)
    handles.write([10])

    handles.prune()

    assert json.loads((tmp_path / IDENTITY_FILE).read_text()) == {"10": "b:1"}


def test_a_remembered_identity_catches_a_reused_pid(tmp_path: Path) -> None:
    first = handles_in(tmp_path, [10], p10="b:1")
    first.remember(10)
    # The process died; a later one got PID 10.
    later = Handles(tmp_path, identity=table(p10="b:999").get)

    assert later.prune() == []
    assert on_disk(tmp_path) == []


def test_a_torn_handle_file_is_treated_as_empty(tmp_path: Path) -> None:
    (tmp_path / HANDLE_FILE).write_text("[123, 45")  # a writer killed mid-write

    assert Handles(tmp_path, identity=table(p123="b:1").get).prune() == []
    assert on_disk(tmp_path) == []


def test_before_the_wheel_made_its_file_nothing_is_written(tmp_path: Path) -> None:
    # initdb refuses a directory that holds anything, even a dot file.
    handles = Handles(tmp_path, identity=table(p10="b:1").get)

    assert handles.prune() == []
    handles.remember(10)
    handles.write([10])
    handles.forget(10)

    assert list(tmp_path.iterdir()) == []


# --- The real process table ---------------------------------------------------------


@pytest.fixture
def exited_child() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=30)
    return child.pid


@pytest.fixture
def zombie_child() -> Iterator[int]:
    """A child that has exited but is not reaped yet (we do not wait for it)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while _state(child.pid) != "Z":
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.01)
    yield child.pid
    child.wait(timeout=30)


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@linux_only
def test_this_process_has_a_stable_identity() -> None:
    assert process_identity(ME)
    assert process_identity(ME) == process_identity(ME)


@linux_only
def test_a_process_started_later_has_another_identity() -> None:
    # The token is the start time (10 ms ticks): this test process started well before.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert process_identity(child.pid) not in {None, process_identity(ME)}
    finally:
        child.kill()
        child.wait(timeout=30)


@linux_only
def test_an_exited_child_has_no_identity(exited_child: int) -> None:
    assert process_identity(exited_child) is None


@linux_only
def test_a_zombie_has_no_identity(zombie_child: int) -> None:
    # os.kill(pid, 0) succeeds on a zombie; it will still never leave the handle file.
    assert process_identity(zombie_child) is None


@linux_only
def test_pruning_real_pids_keeps_only_this_process(
    tmp_path: Path, exited_child: int, zombie_child: int
) -> None:
    (tmp_path / HANDLE_FILE).write_text(json.dumps([exited_child, ME, zombie_child]))

    assert Handles(tmp_path).prune() == [ME]
    assert on_disk(tmp_path) == [ME]


@linux_only
def test_pruning_drops_this_pid_when_it_was_recorded_for_another_process(
    tmp_path: Path,
) -> None:
    (tmp_path / HANDLE_FILE).write_text(json.dumps([ME]))
    (tmp_path / IDENTITY_FILE).write_text(json.dumps({str(ME): "another-boot:1"}))

    assert Handles(tmp_path).prune() == []


# --- A postmaster.pid left by a dead server -----------------------------------------


@pytest.fixture
def fake_postgres(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Start `sleep` as a process named `postgres`; every one is killed afterwards."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        process.kill()
        process.wait(timeout=30)


def start_fake_postgres(
    started: list[subprocess.Popen[bytes]], tmp_path: Path, cwd: Path
) -> subprocess.Popen[bytes]:
    binary = tmp_path / "bin" / "postgres"
    if not binary.exists():
        binary.parent.mkdir()
        sleep = shutil.which("sleep")
        assert sleep is not None
        binary.symlink_to(sleep)
    process = subprocess.Popen([str(binary), "300"], cwd=cwd)
    started.append(process)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{process.pid}/comm").read_text().strip() != "postgres":
        assert time.monotonic() < deadline, "the fake postgres did not start"
        time.sleep(0.01)
    return process


def data_dir_with_postmaster_pid(tmp_path: Path, pid: int) -> Path:
    data_dir = tmp_path / "pgdata"
    data_dir.mkdir(exist_ok=True)
    lines = [str(pid), str(data_dir), "1764586252", "5432", str(data_dir), "", "0 0", "ready"]
    (data_dir / "postmaster.pid").write_text("\n".join(lines) + "\n")
    (data_dir / ".s.PGSQL.5432.lock").write_text(f"{pid}\n{data_dir}\n")
    return data_dir


@linux_only
def test_the_lock_files_of_a_server_that_exited_are_removed(
    tmp_path: Path, exited_child: int
) -> None:
    data_dir = data_dir_with_postmaster_pid(tmp_path, exited_child)

    clear_stale_postmaster(data_dir, within=5)

    assert not (data_dir / "postmaster.pid").exists()
    assert not (data_dir / ".s.PGSQL.5432.lock").exists()


@linux_only
def test_a_zombie_postmaster_is_not_taken_for_a_running_server(
    tmp_path: Path, zombie_child: int
) -> None:
    # PostgreSQL itself refuses to start over it: kill(pid, 0) succeeds on a zombie.
    data_dir = data_dir_with_postmaster_pid(tmp_path, zombie_child)

    clear_stale_postmaster(data_dir, within=5)

    assert not (data_dir / "postmaster.pid").exists()


@linux_only
def test_a_postmaster_pid_reused_by_another_kind_of_process_is_cleared(tmp_path: Path) -> None:
    data_dir = data_dir_with_postmaster_pid(tmp_path, ME)  # alive, but python

    clear_stale_postmaster(data_dir, within=5)

    assert not (data_dir / "postmaster.pid").exists()


@linux_only
def test_the_lock_files_of_a_running_server_are_kept(
    tmp_path: Path, fake_postgres: list[subprocess.Popen[bytes]]
) -> None:
    data_dir = tmp_path / "pgdata"
    data_dir.mkdir()
    server = start_fake_postgres(fake_postgres, tmp_path, cwd=data_dir)
    data_dir_with_postmaster_pid(tmp_path, server.pid)

    assert server_processes(data_dir) == [server.pid]
    clear_stale_postmaster(data_dir, within=5)

    assert (data_dir / "postmaster.pid").exists()
    assert (data_dir / ".s.PGSQL.5432.lock").exists()
    assert server.poll() is None


@linux_only
def test_processes_left_by_a_dead_postmaster_are_killed_once_their_time_is_up(
    tmp_path: Path, exited_child: int, fake_postgres: list[subprocess.Popen[bytes]]
) -> None:
    data_dir = data_dir_with_postmaster_pid(tmp_path, exited_child)
    orphan = start_fake_postgres(fake_postgres, tmp_path, cwd=data_dir)
    elsewhere = start_fake_postgres(fake_postgres, tmp_path, cwd=tmp_path)

    started = time.monotonic()
    clear_stale_postmaster(data_dir, within=0.5)

    assert 0.5 <= time.monotonic() - started < 10
    assert orphan.wait(timeout=10) == -9
    assert elsewhere.poll() is None  # another directory's postgres is none of ours
    assert not (data_dir / "postmaster.pid").exists()
