"""Process plumbing for the service: signals, the listening socket, uvicorn in our loop."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import signal
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import uvicorn
from litestar import Litestar

from jobqueue.entrypoints.config import HttpAddress, Settings

_log = logging.getLogger("jobqueue")


class StartupError(Exception):
    """The process cannot start; the message says why and what to change. Reported
    without a traceback: it is the operator's to fix, not a bug."""


# --- HTTP -----------------------------------------------------------------------------------


def bind(address: HttpAddress, variable: str = "HTTP_ADDR") -> socket.socket:
    """A socket bound to `address`, so a taken port stops the process before it starts
    anything else. Errors name `variable`, the setting the operator has to change."""
    try:
        family, kind, protocol, _, sockaddr = socket.getaddrinfo(
            address.host, address.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as error:
        raise StartupError(f"{variable} {address}: cannot resolve the host: {error}") from None
    sock = socket.socket(family, kind, protocol)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(sockaddr)
    except OSError as error:
        sock.close()
        if error.errno == errno.EADDRINUSE:
            raise StartupError(f"{variable} {address} is already in use") from None
        raise StartupError(f"{variable} {address}: cannot listen: {error.strerror}") from None
    return sock


class _HttpServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The service installs its own handlers on the loop: uvicorn's would replace them
        # and stop only the HTTP side, skipping the ordered shutdown.
        yield


def http_server(app: Litestar, settings: Settings) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        lifespan="on",
        log_config=None,
        access_log=False,
        server_header=False,
        # Requests still running when the listener closed get this long, like jobs do.
        timeout_graceful_shutdown=max(1, round(settings.shutdown_timeout.total_seconds())),
    )
    return _HttpServer(config)


async def serve_http(server: uvicorn.Server, sock: socket.socket) -> None:
    try:
        await server.serve(sockets=[sock])
    except SystemExit:
        # uvicorn exits the process when the application's startup fails; here that is
        # one failed component among several, reported like the others.
        raise StartupError("the HTTP server failed to start (see the log above)") from None


# --- signals -------------------------------------------------------------------------------


class Signals:
    """SIGINT/SIGTERM. When `graceful`, the first sets `requested` and the second forces;
    otherwise the first forces. Forcing cancels the main task."""

    def __init__(self, *, graceful: bool = True) -> None:
        self.requested = asyncio.Event()
        self.forced = False
        self._graceful = graceful
        self._main: asyncio.Task[Any] | None = None

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        self._main = asyncio.current_task()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, self._received, signum)

    def uninstall(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)

    def _received(self, signum: int) -> None:
        name = signal.Signals(signum).name
        if self._graceful and not self.requested.is_set():
            _log.info("%s received: shutting down gracefully (again to force)", name)
            self.requested.set()
            return
        if not self.forced:
            _log.warning("%s received: exiting now", name)
            self.forced = True
            if self._main is not None:
                self._main.cancel()


@asynccontextmanager
async def installed(signals: Signals) -> AsyncIterator[Signals]:
    signals.install()
    try:
        yield signals
    finally:
        signals.uninstall()
