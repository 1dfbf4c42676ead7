"""Which processes hold the embedded server (`embedded.py`): the PIDs attached to it, as the
wheel's handle file lists them, and the server's own processes, each told apart from a
process that merely reused its PID by its start time (and the boot it started in).

A process killed with SIGKILL never removes its PID from the wheel's handle file: every
start and stop prunes the PIDs whose process is gone or changed (`Handles.prune`).
"""

from __future__ import annotations

import functools
import json
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

_log = logging.getLogger("jobqueue.adapters.postgres.embedded")

HANDLE_FILE = ".handle_pids.json"  # the wheel's: a JSON list of the attached PIDs
IDENTITY_FILE = ".jobqueue_handles.json"  # ours: {"pid": identity} of the PIDs we added
# Locked (flock) by the data directory's running watchdog, and holding its PID.
WATCHDOG_FILE = ".jobqueue_watchdog"

_PROC = Path("/proc")
_HAS_PROC = (_PROC / "self" / "stat").exists()


def process_identity(pid: int) -> str | None:
    """Who holds `pid` now: None when no process does, or only a zombie (it will never
    leave); else a token that differs for a later process given the same PID ("" where
    the platform has no /proc to tell)."""
    if pid <= 0:
        return None
    if not _HAS_PROC:
        return "" if _exists(pid) else None
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        # Gone, or hidden from us (/proc mounted with hidepid): ask the kernel.
        return "" if _exists(pid) else None
    # The command name (2nd field) may hold spaces and parentheses: split after it.
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in {"Z", "X", "x"}:
        return None
    # Start time in clock ticks since boot (field 22), qualified by the boot: unlike a
    # wall-clock time it cannot shift when the clock is set.
    return f"{_boot_id()}:{fields[19]}"


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process, but a process
    return True


@functools.cache
def _boot_id() -> str:
    try:
        return (_PROC / "sys" / "kernel" / "random" / "boot_id").read_text().strip()
    except OSError:
        return ""


def live_handles(
    pids: Iterable[int],
    recorded: Mapping[int, str],
    identity: Callable[[int], str | None] = process_identity,
) -> list[int]:
    """The PIDs of `pids` that still name the process that registered: alive, and (when
    `recorded` has its identity) the same process, not a later one reusing the PID."""
    live: list[int] = []
    for pid in pids:
        now = identity(pid)
        if now is None:
            continue
        then = recorded.get(pid)
        if then and now and then != now:
            continue
        if pid not in live:
            live.append(pid)
    return live


@dataclass(frozen=True)
class Handles:
    """The wheel's handle file of a data directory, and our record of who wrote each PID.

    Callers hold the locks (`data_dir_lock`, then the wheel's). Nothing is written
    while the wheel's file does not exist: before initdb the directory must stay empty.
    """

    data_dir: Path
    identity: Callable[[int], str | None] = process_identity

    @property
    def path(self) -> Path:
        return self.data_dir / HANDLE_FILE

    @property
    def identities_path(self) -> Path:
        return self.data_dir / IDENTITY_FILE

    def read(self) -> list[int] | None:
        """The PIDs in the wheel's file; None when it is missing or unreadable."""
        try:
            values = json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        except ValueError:
            # The wheel writes in place; a process killed mid-write leaves a torn file.
            _log.warning(
                "the embedded PostgreSQL's handle file is unreadable; treating it as empty",
                extra={"path": str(self.path)},
            )
            return None
        if not isinstance(values, list):
            return None
        return [value for value in values if isinstance(value, int)]

    def recorded(self) -> dict[int, str]:
        try:
            values = json.loads(self.identities_path.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(values, dict):
            return {}
        return {
            int(pid): token
            for pid, token in values.items()
            if pid.isdigit() and isinstance(token, str)
        }

    def prune(self) -> list[int]:
        """Drop the PIDs whose process is gone; returns those still attached."""
        if not self.path.exists():
            return []
        pids = self.read()
        recorded = self.recorded()
        live = live_handles(pids or [], recorded, self.identity)
        if live != pids:
            gone = [pid for pid in pids or [] if pid not in live]
            if gone:
                _log.info(
                    "pruned the PIDs of processes that are gone from the embedded "
                    "PostgreSQL's handle file",
                    extra={"pids": gone, "data_dir": str(self.data_dir)},
                )
            self.write(live)
        kept = {pid: token for pid, token in recorded.items() if pid in live}
        if kept != recorded:
            self._write_identities(kept)
        return live

    def write(self, pids: list[int]) -> None:
        """Replace the wheel's list (never creating it: the wheel does, after initdb)."""
        if self.path.exists():
            _write_json(self.path, pids)

    def remember(self, pid: int) -> None:
        """Record who `pid` is, so a later process reusing it is not taken for it."""
        token = self.identity(pid)
        if token:
            recorded = self.recorded()
            recorded[pid] = token
            self._write_identities(recorded)

    def forget(self, pid: int) -> None:
        recorded = self.recorded()
        if recorded.pop(pid, None) is not None:
            self._write_identities(recorded)

    def _write_identities(self, recorded: Mapping[int, str]) -> None:
        if not self.path.exists():
            return
        _write_json(self.identities_path, {str(pid): token for pid, token in recorded.items()})


def _write_json(path: Path, value: object) -> None:
    # Replaced, never rewritten in place: a reader sees the old or the new file, whole.
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(value))
    os.replace(temporary, path)


# --- The server's own processes -----------------------------------------------------


def server_processes(data_dir: Path) -> list[int]:
    """Live `postgres` processes working in `data_dir` (every process of a server has its
    data directory as working directory). Linux only; elsewhere an empty list."""
    if not _HAS_PROC:
        return []
    try:
        wanted = os.stat(data_dir)
    except OSError:
        return []
    found = []
    for entry in _PROC.iterdir():
        if entry.name.isdigit() and _is_postgres_in(int(entry.name), wanted):
            found.append(int(entry.name))
    return found


def _is_postgres_in(pid: int, directory: os.stat_result) -> bool:
    base = _PROC / str(pid)
    try:
        if (base / "comm").read_text().strip() != "postgres":
            return False
        # A server runs as the owner of its data directory (PostgreSQL insists on it).
        uid_line = next(
            line for line in (base / "status").read_text().splitlines() if line.startswith("Uid:")
        )
        if int(uid_line.split()[1]) != directory.st_uid:
            return False
    except (OSError, StopIteration, IndexError, ValueError):
        return False  # gone, or not a process we can read
    if process_identity(pid) is None:
        return False  # a zombie
    try:
        cwd = os.stat(base / "cwd")
    except PermissionError:
        return True  # the data directory's owner, but we may not look closer: assume it
    except OSError:
        return False
    return (cwd.st_dev, cwd.st_ino) == (directory.st_dev, directory.st_ino)


def is_server(pid: int, data_dir: Path) -> bool:
    """Whether `pid` is a live postgres of this data directory (without /proc: alive)."""
    if not _HAS_PROC:
        return _exists(pid)
    try:
        wanted = os.stat(data_dir)
    except OSError:
        return False
    return _is_postgres_in(pid, wanted)
