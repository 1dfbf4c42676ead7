"""uvicorn in our event loop, as a component: the API on HTTP_ADDR, the probes and the
scrape on METRICS_ADDR. Imported only by a process that serves HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import uvicorn
from litestar.types import ASGIApp
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from jobqueue.entrypoints.http.app import HttpConfig
from jobqueue.entrypoints.service.components import StopPhase
from jobqueue.entrypoints.service.runtime import StartupError


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The service installs its own handlers on the loop: uvicorn's would replace them
        # and stop only the HTTP side, skipping the ordered shutdown.
        yield


_REQUEST_TIMEOUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
    b"content-length: 45\r\nconnection: close\r\n\r\n"
    b'{"error":"the request was not sent in time"}\n'
)


def _read_timed(read_timeout: float, max_connections: int) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol with the two limits it lacks, so that slow or idle
    clients cannot hold the process's file descriptors: a request must arrive whole
    (headers and body) within `read_timeout` of the connection opening or of its first
    byte, and connections past `max_connections` are closed as they open. (uvicorn's own
    `limit_concurrency` still accepts them, and answers 503 only once headers arrive.)
    Keep-alive connections idle between requests are uvicorn's: closed after 5 s."""

    class ReadTimedProtocol(HttpToolsProtocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._read_deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                transport.close()
                return
            self._arm()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if self._read_deadline is None:
                self._arm()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._disarm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._read_deadline = self.loop.call_later(read_timeout, self._timed_out)

        def _disarm(self) -> None:
            if self._read_deadline is not None:
                self._read_deadline.cancel()
                self._read_deadline = None

        def _timed_out(self) -> None:
            self._read_deadline = None
            if self.transport.is_closing():
                return
            if self.cycle is None or self.cycle.response_complete:
                # Its headers never came: nothing of ours reads this request, so the 408
                # is the protocol's to send. A body that stalls is the application's
                # request: closing it tells the route its client went away.
                self.transport.write(_REQUEST_TIMEOUT)
            self.transport.close()

    return ReadTimedProtocol


def http_server(
    app: ASGIApp,
    *,
    graceful_timeout: timedelta,
    read_timeout: timedelta,
    max_connections: int,
) -> uvicorn.Server:
    """A uvicorn server for `app` that leaves signals to the service; requests still
    running when the listener closed get `graceful_timeout` (at least a second)."""
    config = uvicorn.Config(
        app,
        # httptools (a dependency) over uvicorn's pure-Python parser; uvicorn's default
        # event loop setting is left alone: uvloop measured no faster here.
        http=_read_timed(read_timeout.total_seconds(), max_connections),
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
        phase: StopPhase,
        app: ASGIApp,
        sock: socket.socket,
        config: HttpConfig,
    ) -> None:
        self.name = name
        self.phase = phase
        self._server = http_server(
            app,
            graceful_timeout=config.graceful_timeout,
            read_timeout=config.read_timeout,
            max_connections=config.max_connections,
        )
        self._sock = sock

    async def run(self) -> None:
        await serve_http(self._server, self._sock)

    def stop(self) -> None:
        # Stops accepting connections, then finishes the requests in flight.
        self._server.should_exit = True
