"""The watchdog of an embedded PostgreSQL (`embedded.py`): it stops the server once every
process attached to it is gone, however they went.

The last process to leave stops the server, but a process killed with SIGKILL never
leaves: its PID is pruned at the next start in the data directory, and until then the
server ran on, for ever when no next start came (the clone deleted). The server is
shared, so a parent-death signal on the postmaster would not do: another live process may
still be using it. Instead, attaching starts this process (`start_watchdog`) unless one
runs. It runs in a session of its own, so a kill of the attaching process's group (Ctrl-C,
`kill -9 -PGID` of `make run`) does not reach it; nor does it reach the postmaster, which
`pg_ctl` starts in a session of its own.

Every `POLL` seconds it reads the handle file without locks. When a PID there names a
process that is gone, or no server runs, it looks again under the locks every start and
stop takes, so no process attaches in between: it prunes the dead PIDs, and when no live
one is left it stops the server (as the last process to leave would) or finds it gone,
and exits. It holds `WATCHDOG_FILE` locked while it
runs and lets go of it under the data directory's lock, under which attaching looks at
it: a process attaching just after it decided to exit sees it free and starts another.

Run as `python -m jobqueue.adapters.postgres.embedded_watchdog DATA_DIR`; its output goes
to the server's log in the data directory.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

from jobqueue.adapters.postgres.embedded_handles import WATCHDOG_FILE, Handles, live_handles
from jobqueue.adapters.postgres.embedded_server import (
    EmbeddedPostgresError,
    data_dir_lock,
    import_wheel,
    running_server,
    stop_server,
    wheel_lock,
)

POLL = 0.5  # seconds between looks: the server stops within about this of the last death
MODULE = "jobqueue.adapters.postgres.embedded_watchdog"  # not __name__: "__main__" when run

_log = logging.getLogger("jobqueue.adapters.postgres.embedded_watchdog")


def start_watchdog(data_dir: Path) -> None:
    """Start the watchdog of `data_dir` (`watch`, in a process of its own) unless one
    holds the lock file. Callers hold `data_dir_lock`. Its output goes to the server's
    log."""
    if sys.platform == "win32":  # pragma: no cover - no flock, no sessions
        return
    import fcntl

    try:
        descriptor = os.open(data_dir / WATCHDOG_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # a watchdog: no other process looks at it under our lock
        finally:
            os.close(descriptor)
        with (data_dir / "log").open("ab") as log:
            # A session of its own: a kill of our process group must not reach it. Not
            # our pipes: a caller reading our output to its end would wait for it too.
            subprocess.Popen(
                [sys.executable, "-m", MODULE, str(data_dir)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
    except OSError as error:
        _log.warning(
            "could not start the embedded PostgreSQL's watchdog: if this process is "
            "killed, the server runs on until the next start in this data directory",
            extra={"error": str(error), "data_dir": str(data_dir)},
        )


def watch(data_dir: Path) -> None:
    """Watch the server of `data_dir` until it is stopped or gone (or another watchdog
    holds the lock file)."""
    lock = _hold(data_dir / WATCHDOG_FILE)
    if lock is None:
        return
    over = False
    try:
        wheel = import_wheel()
        while not over:
            try:
                over = not _undisturbed(data_dir) and _settle(wheel, data_dir, lock)
            except EmbeddedPostgresError as error:
                _log.warning("%s; looking again", error)  # a lock held for long: wait on
            if not over:
                time.sleep(POLL)
    except FileNotFoundError:
        pass  # the data directory was deleted (a temporary server): nothing left to watch
    finally:
        if not over:
            os.close(lock)


def _hold(path: Path) -> int | None:
    """The lock file locked, with our PID in it; None when another process holds it."""
    import fcntl

    try:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except FileNotFoundError:
        return None  # the data directory is gone already
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        return None
    os.ftruncate(descriptor, 0)
    os.write(descriptor, f"{os.getpid()}\n".encode())
    return descriptor


def _undisturbed(data_dir: Path) -> bool:
    """Whether every PID in the handle file (one at least) names a live process, and the
    server runs: a look without locks, which only ever keeps the watch going."""
    handles = Handles(data_dir)
    pids = handles.read()
    if not pids or live_handles(pids, handles.recorded()) != pids:
        return False
    return running_server(data_dir) is not None


def _settle(wheel: ModuleType, data_dir: Path, lock: int) -> bool:
    """Under the locks: prune the PIDs of dead processes, and stop the server if no live
    one is left; True when the watch is over, the lock file then closed (still under
    the data directory's lock)."""
    with data_dir_lock(data_dir, create=False), wheel_lock(wheel):
        attached = Handles(data_dir).prune()
        server = running_server(data_dir)
        if attached and server is not None:
            return False  # others live on (or one attached since the look without locks)
        if server is not None:
            _log.warning(
                "every process attached to the embedded PostgreSQL (postmaster %s) is "
                "gone without stopping it (killed?); stopping it",
                server,
            )
            stop_server(wheel, data_dir)
        os.close(lock)
        return True


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(f"usage: python -m {_log.name} DATA_DIR", file=sys.stderr)
        return 2
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="%(asctime)s jobqueue embedded-postgres watchdog %(process)d: %(message)s",
    )
    watch(Path(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
