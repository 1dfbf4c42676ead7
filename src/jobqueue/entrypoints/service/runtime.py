"""Process plumbing for the service: signals, bound sockets, the startup error.

Imports neither uvicorn nor Litestar: a worker without HTTP loads this too. Running
uvicorn in our loop is `entrypoints/http/server.py`.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import logging
import signal
import socket
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobqueue.entrypoints.config.variables import HttpAddress

_log = logging.getLogger("jobqueue")


class StartupError(Exception):
    """The process cannot start; the message says why and what to change. Reported
    without a traceback: it is the operator's to fix, not a bug."""


# --- sockets --------------------------------------------------------------------------------


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


@dataclass(frozen=True, slots=True)
class Listeners:
    """The bound sockets of the process: the API's on HTTP_ADDR, the metrics server's
    on METRICS_ADDR; either may be absent."""

    api: socket.socket | None
    metrics: socket.socket | None

    def close(self) -> None:
        for sock in (self.api, self.metrics):
            if sock is not None:
                sock.close()


def is_loopback(address: HttpAddress) -> bool:
    """Whether only this machine can reach `address` (an empty host is every interface)."""
    if address.host == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.host).is_loopback
    except ValueError:
        return False


def warn_if_open(address: HttpAddress, tokens: Collection[str]) -> None:
    """A WARNING when the API listens beyond this machine and asks for no token."""
    if tokens or is_loopback(address):
        return
    _log.warning(
        "the API listens on %s, reachable from other machines, and API_TOKENS is empty: "
        "anyone who reaches it can submit, cancel and delete jobs; set API_TOKENS, or "
        "HTTP_ADDR=127.0.0.1:PORT to keep it to this machine",
        address,
        extra={"http_addr": str(address)},
    )


def bind_listeners(api: HttpAddress | None, metrics: HttpAddress | None) -> Listeners:
    """Bind every port first, so a taken one stops the process before anything starts."""
    api_socket = bind(api) if api is not None else None
    if metrics is None:
        return Listeners(api_socket, None)
    try:
        if api is not None and _same_port(metrics, api):
            raise StartupError(
                f"METRICS_ADDR {metrics} is the port of HTTP_ADDR {api}, "
                "which serves /metrics already; choose another port, or unset METRICS_ADDR"
            )
        return Listeners(api_socket, bind(metrics, "METRICS_ADDR"))
    except StartupError:
        if api_socket is not None:
            api_socket.close()
        raise


def _same_port(one: HttpAddress, other: HttpAddress) -> bool:
    # Both sockets are bound before either listens, and Linux lets SO_REUSEADDR sockets
    # share a port until then: the clash would surface later, inside uvicorn.
    wildcards = {"0.0.0.0", "::"}
    hosts_overlap = one.host == other.host or bool({one.host, other.host} & wildcards)
    return one.port == other.port and hosts_overlap


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
