"""Places on 127.0.0.1 for the webhook handler to call, as fixtures that its tests import
by name: a receiver that records every request and answers each path as told (also over
TLS, with a certificate for service.test only), a port that refuses connections and one
that never answers."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


class Receiver:
    """Records every request and answers each path as told (204 by default)."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.requests: list[Received] = []
        self.answers: dict[str, Answer] = {}
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver._record(Received(self.path, dict(self.headers.items()), body))
                answer = receiver.answers.get(self.path, Answer(204, {}, b""))
                self.send_response(answer.status)
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self.scheme = "http" if tls is None else "https"
        self.port = self._server.server_address[1]
        # A short poll interval only makes shutdown (test teardown) quick.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def url(self, path: str = "/hook", host: str = "127.0.0.1") -> str:
        return f"{self.scheme}://{host}:{self.port}{path}"

    def answer(
        self, path: str, status: int, headers: dict[str, str] | None = None, body: bytes = b""
    ) -> None:
        self.answers[path] = Answer(status, headers or {}, body)

    def received(self) -> list[Received]:
        with self._lock:
            return list(self.requests)

    def _record(self, request: Received) -> None:
        with self._lock:
            self.requests.append(request)

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=30)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as running:
        yield running


@dataclass(frozen=True)
class Certificate:
    cert: Path
    key: Path


@pytest.fixture(scope="module")
def service_certificate(tmp_path_factory: pytest.TempPathFactory) -> Certificate:
    """A self-signed certificate valid for the name service.test only (not 127.0.0.1)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        # Not a skip: a machine without it would pass the suite without testing TLS.
        pytest.fail(
            "openssl is not installed; it makes the test certificate: make prerequisites",
            pytrace=False,
        )
    directory = tmp_path_factory.mktemp("tls")
    made = Certificate(directory / "cert.pem", directory / "key.pem")
    options = "req -x509 -nodes -days 1 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1"
    names = ["-subj", "/CN=service.test", "-addext", "subjectAltName=DNS:service.test"]
    files = ["-keyout", str(made.key), "-out", str(made.cert)]
    subprocess.run(
        [openssl, *options.split(), *files, *names],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return made


@pytest.fixture
def tls_receiver(service_certificate: Certificate) -> Iterator[Receiver]:
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(service_certificate.cert, service_certificate.key)
    with Receiver(tls) as running:
        yield running


@pytest.fixture
def trusting_network(service_certificate: Certificate) -> httpx.AsyncBaseTransport:
    """The real socket layer, trusting the test certificate and nothing else."""
    trust = ssl.create_default_context(cafile=str(service_certificate.cert))
    return httpx.AsyncHTTPTransport(verify=trust, retries=0)


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections: bound, so nobody else takes it, but
    not listening."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts connections (in the kernel) and never answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield sock.getsockname()[1]
