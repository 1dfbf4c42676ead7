"""The webhook handler against a real HTTP server on 127.0.0.1; no other address is ever
contacted: cases that would reach elsewhere if the SSRF guard failed use a transport
that sends nothing."""

from __future__ import annotations

import json
import logging
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import ip_address
from pathlib import Path
from typing import Any, cast
from uuid import uuid4

import httpx
import msgspec
import pytest

from jobqueue.adapters.handlers import builtin_registry
from jobqueue.adapters.handlers.sleep import SleepPayload
from jobqueue.adapters.handlers.ssrf import DestinationRefused, PinnedTransport, non_public
from jobqueue.adapters.handlers.webhook import (
    WebhookHandler,
    WebhookPayload,
    WebhookRetryable,
    parse_retry_after,
    webhook_handler,
)
from jobqueue.adapters.handlers.webhook_payload import PublicWebhookPayload
from jobqueue.adapters.payloads import MsgspecPayloadDecoder
from jobqueue.domain.errors import InvalidPayload, Permanent, is_permanent
from jobqueue.domain.fields import JsonValue
from jobqueue.domain.registry import JobContext, Registry

ALLOW_HINT = "set WEBHOOK_ALLOW_PRIVATE=true to allow private destinations"

# --- a receiver on 127.0.0.1 ----------------------------------------------------------


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


# --- fakes for DNS and for the socket layer -------------------------------------------


class FakeResolver:
    """DNS as a table; records every lookup."""

    def __init__(self, table: dict[str, list[str]] | None = None) -> None:
        self.table = table or {}
        self.lookups: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append((host, port))
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self.table[host]


class NoTraffic(httpx.AsyncBaseTransport):
    """Stands in for the network where a request must never be sent."""

    def __init__(self) -> None:
        self.attempts: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.attempts.append(request)
        raise AssertionError(f"a request was sent to {request.url}")


def context() -> JobContext:
    return JobContext(
        job_id=uuid4(),
        job_type="webhook",
        attempt=1,
        max_attempts=3,
        deadline=datetime.now(UTC) + timedelta(minutes=5),
        logger=logging.getLogger("test.webhook"),
    )


def payload(value: JsonValue) -> WebhookPayload:
    decoded: WebhookPayload = MsgspecPayloadDecoder().decode("webhook", value, WebhookPayload)
    return decoded


def handler(
    *,
    allow_private: bool,
    resolve: FakeResolver | None = None,
    network: httpx.AsyncBaseTransport | None = None,
    timeout: timedelta = timedelta(seconds=30),
) -> WebhookHandler:
    return webhook_handler(
        allow_private=allow_private,
        timeout=timeout,
        **({} if resolve is None else {"resolve": resolve}),
        inner_transport=None if network is None else (lambda: network),
    )


async def deliver(handle: WebhookHandler, url: str, body: JsonValue = None) -> JobContext:
    ctx = context()
    value: dict[str, JsonValue] = {"url": url}
    if body is not None:
        value["body"] = body
    await handle(ctx, payload(value))
    return ctx


# --- delivery -------------------------------------------------------------------------


async def test_posts_the_body_as_json_with_the_job_id_as_idempotency_key(
    receiver: Receiver,
) -> None:
    body: JsonValue = {"order": 42, "items": ["a", "b"], "note": None}

    ctx = await deliver(handler(allow_private=True), receiver.url("/hook"), body)

    [request] = receiver.received()
    assert request.path == "/hook"
    assert json.loads(request.body) == body
    assert request.headers["Idempotency-Key"] == str(ctx.job_id)
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["User-Agent"].startswith("jobqueue/")


async def test_sends_an_empty_object_when_the_payload_has_no_body(receiver: Receiver) -> None:
    await deliver(handler(allow_private=True), receiver.url())

    [request] = receiver.received()
    assert json.loads(request.body) == {}


@pytest.mark.parametrize("status", [200, 201, 202, 204])
async def test_any_2xx_answer_is_success(receiver: Receiver, status: int) -> None:
    receiver.answer("/hook", status)

    await deliver(handler(allow_private=True), receiver.url("/hook"))

    assert len(receiver.received()) == 1


async def test_429_is_retryable_and_carries_retry_after(receiver: Receiver) -> None:
    receiver.answer("/hook", 429, {"Retry-After": "7"}, b"slow down")

    with pytest.raises(WebhookRetryable) as raised:
        await deliver(handler(allow_private=True), receiver.url("/hook"))

    assert raised.value.retry_after == timedelta(seconds=7)
    assert "answered 429 Too Many Requests: slow down" in str(raised.value)
    assert not is_permanent(raised.value)


@pytest.mark.parametrize("status", [500, 502, 503, 408])
async def test_5xx_and_408_are_retryable_without_retry_after(
    receiver: Receiver, status: int
) -> None:
    receiver.answer("/hook", status)

    with pytest.raises(WebhookRetryable) as raised:
        await deliver(handler(allow_private=True), receiver.url("/hook"))

    assert f"answered {status}" in str(raised.value)
    assert raised.value.retry_after is None
    assert not is_permanent(raised.value)


async def test_503_honours_an_http_date_retry_after(receiver: Receiver) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    receiver.answer("/hook", 503, {"Retry-After": later.strftime("%a, %d %b %Y %H:%M:%S GMT")})

    with pytest.raises(WebhookRetryable) as raised:
        await deliver(handler(allow_private=True), receiver.url("/hook"))

    assert raised.value.retry_after is not None
    assert timedelta(minutes=50) < raised.value.retry_after <= timedelta(hours=1)


@pytest.mark.parametrize(
    ("status", "reason"), [(400, "Bad Request"), (404, "Not Found"), (422, "Unprocessable")]
)
async def test_other_4xx_fail_permanently_quoting_the_answer(
    receiver: Receiver, status: int, reason: str
) -> None:
    receiver.answer("/hook", status, body=b'{"error": "no such hook"}')

    with pytest.raises(Permanent) as raised:
        await deliver(handler(allow_private=True), receiver.url("/hook"))

    message = str(raised.value)
    assert f"POST {receiver.url('/hook')} answered {status} {reason}" in message
    assert message.endswith('{"error": "no such hook"}')


async def test_a_redirect_is_not_followed_and_fails_permanently(receiver: Receiver) -> None:
    receiver.answer("/hook", 302, {"Location": "/elsewhere"})

    with pytest.raises(Permanent) as raised:
        await deliver(handler(allow_private=True), receiver.url("/hook"))

    assert [request.path for request in receiver.received()] == ["/hook"]
    assert f"302 Found redirecting to {receiver.url('/elsewhere')}" in str(raised.value)
    assert "redirects are not followed" in str(raised.value)


async def test_a_refused_connection_is_retryable(closed_port: int) -> None:
    with pytest.raises(WebhookRetryable) as raised:
        await deliver(handler(allow_private=True), f"http://127.0.0.1:{closed_port}/hook")

    assert "ConnectError" in str(raised.value)
    assert raised.value.retry_after is None


async def test_a_receiver_that_never_answers_times_out_retryably(silent_port: int) -> None:
    handle = handler(allow_private=True, timeout=timedelta(milliseconds=200))

    with pytest.raises(WebhookRetryable) as raised:
        await deliver(handle, f"http://127.0.0.1:{silent_port}/hook")

    assert "ReadTimeout" in str(raised.value)


async def test_a_name_that_does_not_resolve_is_retryable() -> None:
    resolve = FakeResolver()

    with pytest.raises(WebhookRetryable) as raised:
        await deliver(
            handler(allow_private=False, resolve=resolve, network=NoTraffic()),
            "https://gone.test/hook",
        )

    assert "cannot resolve gone.test" in str(raised.value)
    assert resolve.lookups == [("gone.test", 443)]


async def test_error_messages_leave_out_credentials_and_query(closed_port: int) -> None:
    url = f"http://user:secret@127.0.0.1:{closed_port}/hook?token=hunter2"

    with pytest.raises(WebhookRetryable) as raised:
        await deliver(handler(allow_private=True), url)

    assert f"POST http://127.0.0.1:{closed_port}/hook failed" in str(raised.value)
    assert "secret" not in str(raised.value)
    assert "hunter2" not in str(raised.value)


# --- SSRF -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:8080/", "127.0.0.1 is a loopback address"),
        ("http://[::1]/", "::1 is a loopback address"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address"),
        ("http://10.0.0.1/", "10.0.0.1 is a private address"),
        # Python 3.13 renders mapped addresses differently, hence the computed text.
        ("https://[::ffff:10.0.0.1]/", f"{ip_address('::ffff:10.0.0.1')} is a private address"),
        ("http://0.0.0.0/", "0.0.0.0 is an unspecified address"),
        ("http://224.0.0.1/", "224.0.0.1 is a multicast address"),
    ],
)
async def test_refuses_non_public_ip_literals_before_any_lookup_or_connection(
    url: str, why: str
) -> None:
    resolve = FakeResolver()
    network = NoTraffic()

    with pytest.raises(DestinationRefused) as raised:
        await deliver(handler(allow_private=False, resolve=resolve, network=network), url)

    assert str(raised.value) == f"refusing to call {url}: {why}; {ALLOW_HINT}"
    assert is_permanent(raised.value)
    assert network.attempts == []
    assert resolve.lookups == []


async def test_refuses_the_loopback_receiver_it_could_reach(receiver: Receiver) -> None:
    with pytest.raises(DestinationRefused):
        await deliver(handler(allow_private=False), receiver.url("/hook"))

    assert receiver.received() == []


async def test_refuses_localhost_after_resolving_it(receiver: Receiver) -> None:
    url = receiver.url("/hook", host="localhost")

    with pytest.raises(DestinationRefused) as raised:
        await deliver(handler(allow_private=False), url)

    message = str(raised.value)
    assert message.startswith(f"refusing to call {url}: localhost resolves to ")
    assert message.endswith(f", a loopback address; {ALLOW_HINT}")
    assert receiver.received() == []


async def test_refuses_a_name_that_resolves_to_loopback(receiver: Receiver) -> None:
    resolve = FakeResolver({"rebind.test": ["127.0.0.1"]})
    url = receiver.url("/hook", host="rebind.test")

    with pytest.raises(DestinationRefused) as raised:
        await deliver(handler(allow_private=False, resolve=resolve), url)

    assert "rebind.test resolves to 127.0.0.1, a loopback address" in str(raised.value)
    assert resolve.lookups == [("rebind.test", receiver.port)]
    assert receiver.received() == []


async def test_refuses_a_name_when_any_of_its_addresses_is_private() -> None:
    resolve = FakeResolver({"mixed.test": ["93.184.216.34", "10.1.2.3"]})
    network = NoTraffic()

    with pytest.raises(DestinationRefused) as raised:
        await deliver(
            handler(allow_private=False, resolve=resolve, network=network), "https://mixed.test/"
        )

    assert "mixed.test resolves to 10.1.2.3, a private address" in str(raised.value)
    assert network.attempts == []


async def test_connects_to_the_address_it_checked_with_the_original_host_header(
    receiver: Receiver,
) -> None:
    resolve = FakeResolver({"service.test": ["127.0.0.1"]})

    await deliver(
        handler(allow_private=True, resolve=resolve), receiver.url("/hook", host="service.test")
    )

    [request] = receiver.received()
    assert request.headers["Host"] == f"service.test:{receiver.port}"
    assert resolve.lookups == [("service.test", receiver.port)]


async def test_https_goes_to_the_checked_ip_verifying_tls_for_the_hostname() -> None:
    sent: list[httpx.Request] = []

    def network(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(204)

    resolve = FakeResolver({"hooks.example.com": ["93.184.216.34"]})
    handle = handler(allow_private=False, resolve=resolve, network=httpx.MockTransport(network))

    await deliver(handle, "https://hooks.example.com/hook")

    [request] = sent
    assert request.url == httpx.URL("https://93.184.216.34/hook")
    assert request.headers["Host"] == "hooks.example.com"
    # httpcore uses sni_hostname for both SNI and certificate hostname verification.
    assert request.extensions["sni_hostname"] == "hooks.example.com"


async def test_https_to_the_pinned_ip_verifies_the_certificate_for_the_hostname(
    tls_receiver: Receiver, trusting_network: httpx.AsyncBaseTransport
) -> None:
    resolve = FakeResolver({"service.test": ["127.0.0.1"]})
    handle = handler(allow_private=True, resolve=resolve, network=trusting_network)

    await deliver(handle, tls_receiver.url("/hook", host="service.test"))

    [request] = tls_receiver.received()
    assert request.headers["Host"] == f"service.test:{tls_receiver.port}"


async def test_https_refuses_a_certificate_that_does_not_name_the_host(
    tls_receiver: Receiver, trusting_network: httpx.AsyncBaseTransport
) -> None:
    # Same IP, same trusted certificate; only the name differs, so only a check against
    # the name (not the IP, not "any trusted certificate") can refuse it.
    resolve = FakeResolver({"other.test": ["127.0.0.1"]})
    handle = handler(allow_private=True, resolve=resolve, network=trusting_network)

    with pytest.raises(WebhookRetryable) as raised:
        await deliver(handle, tls_receiver.url("/hook", host="other.test"))

    assert "CERTIFICATE_VERIFY_FAILED" in str(raised.value)
    assert tls_receiver.received() == []


async def test_tries_the_next_checked_address_when_one_refuses_the_connection() -> None:
    tried: list[str] = []

    def network(request: httpx.Request) -> httpx.Response:
        tried.append(request.url.host)
        if request.url.host == "2606:2800:220:1::1":
            raise httpx.ConnectError("Network is unreachable", request=request)
        return httpx.Response(200)

    transport = PinnedTransport(
        allow_private=False,
        resolve=FakeResolver({"dual.test": ["2606:2800:220:1::1", "93.184.216.34"]}),
        inner=httpx.MockTransport(network),
    )
    async with httpx.AsyncClient(transport=transport) as client:
        response = await client.post("http://dual.test/")

    assert response.status_code == 200
    assert tried == ["2606:2800:220:1::1", "93.184.216.34"]


@pytest.mark.parametrize(
    ("address", "verdict"),
    [
        ("93.184.216.34", None),
        ("2606:4700:4700::1111", None),
        ("::ffff:8.8.8.8", None),
        ("64:ff9b::808:808", None),
        ("::ffff:127.0.0.1", "a loopback address"),
        ("fe80::1", "a link-local address"),
        ("fc00::1", "a private address"),
        ("192.168.1.1", "a private address"),
        ("100.64.0.1", "a non-public address"),
        ("240.0.0.1", "a reserved address"),
        ("ff0e::1", "a multicast address"),
        ("fec0::1", "a site-local address"),
        ("2002:7f00:1::", "an IPv6 address embedding 127.0.0.1, a loopback address"),
        ("64:ff9b::a9fe:a9fe", "an IPv6 address embedding 169.254.169.254, a link-local address"),
    ],
)
def test_classifies_addresses_by_where_they_lead(address: str, verdict: str | None) -> None:
    assert non_public(ip_address(address)) == verdict


# --- payload and Retry-After ----------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({"url": "ftp://example.com/"}, "url must start with http:// or https://, not ftp://"),
        ({"url": "example.com/hook"}, "url must start with http:// or https://"),
        ({"url": "http://example.com:port/"}, "url is not a valid URL"),
        ({"url": 5}, "Expected `str`, got `int` - at `$.url`"),
        ({"body": {}}, "Object missing required field `url`"),
        ({"url": "https://example.com/", "method": "PUT"}, "unknown field `method`"),
    ],
)
def test_refuses_invalid_payloads_when_decoding(value: JsonValue, reason: str) -> None:
    with pytest.raises(InvalidPayload) as raised:
        payload(value)

    assert reason in raised.value.reason


def test_accepts_any_json_body() -> None:
    decoded = payload({"url": "https://example.com/", "body": [1, "two", {"three": None}]})

    assert decoded.body == [1, "two", {"three": None}]


async def test_an_invalid_url_that_bypassed_validation_fails_permanently() -> None:
    bypassed = WebhookPayload(url="https://example.com/")
    msgspec.structs.force_setattr(bypassed, "url", "file:///etc/passwd")
    network = NoTraffic()

    with pytest.raises(Permanent) as raised:
        await handler(allow_private=False, network=network)(context(), bypassed)

    assert "url must start with http:// or https://" in str(raised.value)
    assert network.attempts == []


NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("header", "delay"),
    [
        ("7", timedelta(seconds=7)),
        (" 120 ", timedelta(minutes=2)),
        ("Wed, 01 Jan 2025 12:01:30 GMT", timedelta(seconds=90)),
        ("Wed, 01 Jan 2025 11:00:00 GMT", timedelta(0)),
        ("-5", None),
        ("soon", None),
        ("1.5", None),
        ("", None),
        (None, None),
    ],
)
def test_reads_retry_after_as_seconds_or_http_date(
    header: str | None, delay: timedelta | None
) -> None:
    assert parse_retry_after(header, NOW) == delay


# --- the built-in registry ------------------------------------------------------------


def test_builtin_registry_holds_sleep_and_webhook_with_their_payload_types() -> None:
    registry = builtin_registry()

    assert list(registry) == ["sleep", "webhook"]
    assert registry.get("sleep").payload_type is SleepPayload
    # Unless private destinations are allowed, one named literally is refused at once.
    assert registry.get("webhook").payload_type is PublicWebhookPayload
    assert issubclass(PublicWebhookPayload, WebhookPayload)
    assert registry.get("webhook").is_async


async def test_builtin_webhook_refuses_private_destinations_by_default(
    receiver: Receiver,
) -> None:
    handle = registry_webhook(builtin_registry())

    with pytest.raises(DestinationRefused):
        await deliver(handle, receiver.url("/hook"))

    assert receiver.received() == []


async def test_builtin_webhook_reaches_private_destinations_when_allowed(
    receiver: Receiver,
) -> None:
    handle = registry_webhook(builtin_registry(webhook_allow_private=True))

    await deliver(handle, receiver.url("/hook"))

    assert len(receiver.received()) == 1


def registry_webhook(registry: Registry) -> WebhookHandler:
    return cast(WebhookHandler, registry.get("webhook").func)


@pytest.mark.parametrize(
    ("url", "refused"),
    [
        ("http://127.0.0.1:9000/hook", "url's host 127.0.0.1 is a loopback address"),
        ("https://192.168.1.20/", "url's host 192.168.1.20 is a private address"),
        ("http://[fe80::1]/", "url's host fe80::1 is a link-local address"),
        ("http://[::ffff:10.1.2.3]/", "url's host ::ffff:10.1.2.3 is a private address"),
        ("https://93.184.215.14/hook", None),
        # A name is judged by the worker when it resolves it, not at submission.
        ("http://localhost:9000/", None),
    ],
)
def test_a_literal_private_address_is_refused_at_submission_unless_allowed(
    url: str, refused: str | None
) -> None:
    decoder = MsgspecPayloadDecoder()
    public = builtin_registry().get("webhook").payload_type
    allowed = builtin_registry(webhook_allow_private=True).get("webhook").payload_type
    assert public is not None
    assert allowed is not None
    assert decoder.decode("webhook", {"url": url}, allowed).url == url
    if refused is None:
        assert decoder.decode("webhook", {"url": url}, public).url == url
        return
    with pytest.raises(InvalidPayload) as raised:
        decoder.decode("webhook", {"url": url}, public)
    assert refused in str(raised.value)
