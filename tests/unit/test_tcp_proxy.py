"""The fault tests' loopback TCP proxy: it forwards, and paused it blackholes without
closing anything."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator

import pytest

from tests.support.tcp_proxy import TcpProxy

# How long a paused proxy is watched for a byte that must not arrive: a bounded look at
# an absence, not a wait for a condition.
SILENCE = 0.3
ANSWER = 5.0


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(4096):
            self.request.sendall(data)


@pytest.fixture
def echo_server() -> Iterator[tuple[str, int]]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield str(host), int(port)
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def proxy(echo_server: tuple[str, int]) -> Iterator[TcpProxy]:
    with TcpProxy(*echo_server) as running:
        yield running


def connect(proxy: TcpProxy) -> socket.socket:
    client = socket.create_connection(proxy.address, timeout=ANSWER)
    client.settimeout(ANSWER)
    return client


def receive(client: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = client.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def assert_silent(client: socket.socket) -> None:
    client.settimeout(SILENCE)
    with pytest.raises(TimeoutError):
        client.recv(1)
    client.settimeout(ANSWER)


def test_it_forwards_both_ways(proxy: TcpProxy) -> None:
    with connect(proxy) as client:
        client.sendall(b"ping")
        assert receive(client, 4) == b"ping"
    assert proxy.port != 0
    assert proxy.accepted == 1


def test_paused_it_keeps_the_connection_open_but_forwards_nothing_until_resumed(
    proxy: TcpProxy,
) -> None:
    with connect(proxy) as client:
        client.sendall(b"one")
        assert receive(client, 3) == b"one"

        proxy.pause()
        client.sendall(b"two")
        assert_silent(client)  # neither an answer nor an end of stream
        assert proxy.open_connections == 1

        proxy.resume()
        assert receive(client, 3) == b"two"


def test_a_connection_opened_while_paused_is_accepted_and_stalls(proxy: TcpProxy) -> None:
    proxy.pause()
    with connect(proxy) as client:
        client.sendall(b"hello")
        assert_silent(client)
        proxy.resume()
        assert receive(client, 5) == b"hello"


def test_close_ends_every_connection(echo_server: tuple[str, int]) -> None:
    proxy = TcpProxy(*echo_server).start()
    with connect(proxy) as client:
        client.sendall(b"x")
        assert receive(client, 1) == b"x"
        proxy.pause()
        proxy.close()
        try:
            data = client.recv(1)
        except ConnectionResetError:
            data = b""  # a reset ends it as surely as an end of stream
        assert data == b""
    proxy.close()  # twice is harmless
