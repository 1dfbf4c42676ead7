"""Clients that send broken bytes, hang up mid-request, or hold connections open: a real
`jobqueue api` process, spoken to over raw sockets."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.support.processes import Service, free_port, start

pytestmark = pytest.mark.slow

READ_TIMEOUT = 1.0
MAX_CONNECTIONS = 240
IDLE = 200


@pytest.fixture(scope="module")
def service(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    running = start(
        ["api"],
        free_port(),
        tmp_path_factory.mktemp("hostile"),
        DATABASE_URL=database_url,
        HTTP_READ_TIMEOUT=f"{READ_TIMEOUT}s",
        HTTP_MAX_CONNECTIONS=str(MAX_CONNECTIONS),
    )
    try:
        running.wait_until_healthy()
        yield running
    finally:
        running.stop()


def _address(service: Service) -> tuple[str, int]:
    host, port = service.base_url.removeprefix("http://").split(":")
    return host, int(port)


def _connect(service: Service) -> socket.socket:
    sock = socket.create_connection(_address(service), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _post(path: str, body: bytes, *, length: int | None = None) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body) if length is None else length}\r\n\r\n"
    ).encode() + body


def _response(sock: socket.socket) -> tuple[int, bytes]:
    """Status and body of one response on `sock` (the server closes after it, or it is
    read to its Content-Length)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a response: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk
        body += chunk
    return int(lines[0].split()[1]), body


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes `sock` within `seconds` (anything it sends first, a
    408, is read and dropped)."""
    sock.settimeout(seconds)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return True


def _errors(service: Service) -> list[dict[str, object]]:
    return [line for line in service.log() if line["level"] in ("ERROR", "CRITICAL")]


def test_invalid_utf8_inside_a_json_string_is_a_400(service: Service) -> None:
    for raw in (
        b'{"type":"sleep","payload":{"duration":"\xff\xfe"}}',
        b'{"type":"\xc3(","payload":{}}',
        b'{"type":"sleep","payload":{"\xed\xa0\x80":"1s"}}',
    ):
        with _connect(service) as sock:
            sock.sendall(_post("/jobs", raw))
            status, body = _response(sock)
        assert status == 400, body
        assert b"not valid UTF-8" in body, body
    # Bulk bodies too: every route decoding JSON decodes it the same way.
    with _connect(service) as sock:
        sock.sendall(_post("/jobs/cancel", b'{"status":"pending","type":"\xff"}'))
        status, body = _response(sock)
    assert status == 400, body
    assert not _errors(service)


def test_a_client_hanging_up_mid_body_is_logged_as_gone_not_as_a_server_error(
    service: Service,
) -> None:
    body = b'{"type":"sleep","payload":{"duration":"1s"}}'
    with _connect(service) as sock:
        sock.sendall(_post("/jobs", body[:10], length=len(body)))
        time.sleep(0.1)
    deadline = time.monotonic() + 10
    while True:
        gone = [
            line
            for line in service.log()
            if line["logger"] == "jobqueue.access" and line["status"] == 499
        ]
        if gone or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert gone, "no access-log line for the request whose client went away"
    assert any(
        line["message"] == "client went away before sending its whole request"
        and line["level"] == "INFO"
        for line in service.log()
    )
    assert not _errors(service)


def test_a_body_that_stalls_is_closed_after_the_read_timeout(service: Service) -> None:
    body = b'{"type":"sleep","payload":{"duration":"1s"}}'
    with _connect(service) as sock:
        sock.sendall(_post("/jobs", body[:10], length=len(body)))
        assert _closed_within(sock, READ_TIMEOUT + 5)
    assert not _errors(service)


def test_idle_and_partial_connections_are_closed_while_the_service_keeps_answering(
    service: Service,
) -> None:
    held: list[socket.socket] = []
    try:
        for n in range(IDLE):
            sock = _connect(service)
            # A third say nothing, a third send half a request line, a third send
            # headers that never end.
            if n % 3 == 1:
                sock.sendall(b"GET /heal")
            elif n % 3 == 2:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: test\r\nX-Slow: ")
            held.append(sock)
        opened = time.monotonic()
        # Meanwhile the service answers as ever.
        assert httpx.get(f"{service.base_url}/healthz", timeout=5).status_code == 200
        # Every held connection is closed by the server, none outlives the timeout by
        # more than the margin a loaded machine needs.
        for sock in held:
            left = READ_TIMEOUT + 10 - (time.monotonic() - opened)
            assert _closed_within(sock, max(left, 0.1)), "a connection was left open"
        assert httpx.get(f"{service.base_url}/healthz", timeout=5).status_code == 200
    finally:
        for sock in held:
            sock.close()
    assert not _errors(service)


def test_a_request_whose_headers_never_end_gets_a_408(service: Service) -> None:
    with _connect(service) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: test\r\n")
        status, body = _response(sock)
    assert status == 408
    assert body == b'{"error":"the request was not sent in time"}\n'


def test_connections_past_the_limit_are_closed_as_they_open(service: Service) -> None:
    held: list[socket.socket] = []
    try:
        for _ in range(MAX_CONNECTIONS):
            held.append(_connect(service))
        # Accepted only once the server has counted those before it: one past the limit
        # is closed at once, before it could send anything.
        time.sleep(0.5)
        with _connect(service) as extra:
            assert _closed_within(extra, READ_TIMEOUT / 2)
    finally:
        for sock in held:
            sock.close()
    # Once they are gone, connections are served again.
    deadline = time.monotonic() + 10
    while True:
        try:
            if httpx.get(f"{service.base_url}/healthz", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "the service did not answer again"
        time.sleep(0.1)


def test_head_is_answered_wherever_get_is(service: Service) -> None:
    for path in ("/healthz", "/readyz", "/queues", "/jobs?status=pending&limit=1"):
        got = httpx.get(f"{service.base_url}{path}", timeout=5)
        head = httpx.head(f"{service.base_url}{path}", timeout=5)
        assert head.status_code == got.status_code == 200, (path, head.text)
        assert head.content == b""
        assert head.headers["content-type"] == got.headers["content-type"]
        assert "x-request-id" in head.headers
    # And refused where GET is, saying which method was sent.
    refused = httpx.head(f"{service.base_url}/jobs/retry", timeout=5)
    assert refused.status_code == 405
    # Each written as its response goes out: the last may still be on its way.
    deadline = time.monotonic() + 5
    while True:
        access = [
            line
            for line in service.log()
            if line["logger"] == "jobqueue.access" and line["method"] == "HEAD"
        ]
        if len(access) >= 5 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(access) >= 5
