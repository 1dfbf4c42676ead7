"""uvicorn in our event loop, as a component: the API on HTTP_ADDR, the probes and the
scrape on METRICS_ADDR. Imported only by a process that serves HTTP."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from datetime import timedelta

import uvicorn
from litestar.types import ASGIApp

from jobqueue.entrypoints.components import Phase
from jobqueue.entrypoints.runtime import StartupError


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The service installs its own handlers on the loop: uvicorn's would replace them
        # and stop only the HTTP side, skipping the ordered shutdown.
        yield


def http_server(app: ASGIApp, *, graceful_timeout: timedelta) -> uvicorn.Server:
    """A uvicorn server for `app` that leaves signals to the service; requests still
    running when the listener closed get `graceful_timeout` (at least a second)."""
    config = uvicorn.Config(
        app,
        # httptools (a dependency) over uvicorn's pure-Python parser; uvicorn's default
        # event loop setting is left alone: uvloop measured no faster here.
        http="httptools",
        lifespan="on",
        log_config=None,
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=max(1, round(graceful_timeout.total_seconds())),
    )
    return _Server(config)


async def serve_http(server: uvicorn.Server, sock: socket.socket) -> None:
    try:
        await server.serve(sockets=[sock])
    except SystemExit:
        # uvicorn exits the process when the application's startup fails; here that is
        # one failed component among several, reported like the others.
        raise StartupError("the HTTP server failed to start (see the log above)") from None


class HttpServer:
    """A component serving `app` on the bound `sock` until stopped in `phase`."""

    def __init__(
        self,
        name: str,
        phase: Phase,
        app: ASGIApp,
        sock: socket.socket,
        *,
        graceful_timeout: timedelta,
    ) -> None:
        self.name = name
        self.phase = phase
        self._server = http_server(app, graceful_timeout=graceful_timeout)
        self._sock = sock

    async def run(self) -> None:
        await serve_http(self._server, self._sock)

    def stop(self) -> None:
        # Stops accepting connections, then finishes the requests in flight.
        self._server.should_exit = True
