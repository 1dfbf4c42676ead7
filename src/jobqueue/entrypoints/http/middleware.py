"""Request ids, the access log, and bearer-token authentication."""

from __future__ import annotations

import logging
import os
import time
from contextvars import ContextVar

from litestar.enums import ScopeType
from litestar.types import (
    ASGIApp,
    HTTPResponseBodyEvent,
    HTTPResponseStartEvent,
    Message,
    Receive,
    ReceiveMessage,
    Scope,
    Send,
)

from jobqueue.adapters.telemetry.logging import request_context

REQUEST_ID_HEADER = "X-Request-ID"
MAX_REQUEST_ID_LENGTH = 128
# Handlers with this key in their `opt` are open without a token: probes and scrapes
# come from infrastructure that holds none.
PUBLIC = "public"
# The dashboard's pages: a session cookie (`ui/session.py`) does for them what a bearer
# token does for the API.
DASHBOARD = "dashboard"
# Routes that take an HTML form's body (the dashboard's), each checking its CSRF token.
FORM = "form"

_access_log = logging.getLogger("jobqueue.access")
_log = logging.getLogger("jobqueue.http")
_HEADER_NAME = REQUEST_ID_HEADER.lower().encode("latin-1")
_INTERNAL_ERROR = b'{"error":"internal server error"}'


def sane_request_id(value: str | None) -> str | None:
    """The caller's id if it is safe to echo and to log: short, visible ASCII only."""
    if not value or len(value) > MAX_REQUEST_ID_LENGTH:
        return None
    if not all("!" <= character <= "~" for character in value):
        return None
    return value


class RequestContextMiddleware:
    """Wraps the whole application, router included, so that its 404s, 405s and 413s
    get a request id and an access-log line like every other response.

    Litestar's own middleware runs only once a route matched, which is why this is a
    plain ASGI wrapper rather than a Litestar middleware.
    """

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self._app(scope, receive, send)
            return
        # 32 random hex digits, as `uuid4().hex` gives, without building the UUID.
        request_id = sane_request_id(_header(scope, _HEADER_NAME)) or os.urandom(16).hex()
        started = time.perf_counter()
        status = 500
        response_started = False
        # HEAD is answered as GET is, headers (Content-Length included) and all, but with
        # no body: what HTTP asks of it, for every route, with no route declaring it.
        head = scope["method"] == "HEAD"
        routed = {**scope, "method": "GET"} if head else scope
        exchange = _Exchange(scope["method"], receive)

        async def send_with_id(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                response_started = True
                status = message["status"]
                headers = [
                    (name, value)
                    for name, value in message.get("headers", [])
                    if name.lower() != _HEADER_NAME
                ]
                headers.append((_HEADER_NAME, request_id.encode("latin-1")))
                message = {**message, "headers": headers}
            elif head and message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        token = _exchanges.set(exchange)
        with request_context(request_id):
            try:
                await self._app(routed, exchange.receive, send_with_id)
            except Exception:
                # Litestar's exception handlers answer nearly everything; this is the
                # last line for what escapes them (a bug in a handler for errors).
                _log.exception("unhandled error escaped the application")
                if not response_started:
                    await _send_internal_error(send_with_id)
            finally:
                _exchanges.reset(token)
                # Checked first: the fields are built per request, and the access log is
                # off below INFO.
                if _access_log.isEnabledFor(logging.INFO):
                    _access_log.info(
                        "request",
                        extra={
                            "method": scope.get("method", ""),
                            "path": scope.get("path", ""),
                            # As nginx logs it: no status was sent, the client left first.
                            "status": CLIENT_GONE if exchange.gone else status,
                            "duration_ms": round((time.perf_counter() - started) * 1000, 3),
                        },
                    )


# The status the access log shows for a request whose client went away before its
# response could be sent (nginx's 499, "client closed request").
CLIENT_GONE = 499


class _Exchange:
    """One request as the client sent it: its method (HEAD is routed as GET), and whether
    it went away before sending its body whole, for which Litestar raises a 500 that
    would be logged as the server's fault."""

    def __init__(self, method: str, receive: Receive) -> None:
        self.method = method
        self._receive = receive
        self.gone = False

    async def receive(self) -> ReceiveMessage:
        message = await self._receive()
        if message["type"] == "http.disconnect":
            self.gone = True
        return message


_exchanges: ContextVar[_Exchange | None] = ContextVar("jobqueue_exchange", default=None)


def client_went_away() -> bool:
    """Whether the client of the request being served hung up before sending it whole."""
    exchange = _exchanges.get()
    return exchange is not None and exchange.gone


def method_sent(routed: str) -> str:
    """The method the client sent for the request being served (routed as `routed`)."""
    exchange = _exchanges.get()
    return routed if exchange is None else exchange.method


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


async def _send_internal_error(send: Send) -> None:
    start: HTTPResponseStartEvent = {
        "type": "http.response.start",
        "status": 500,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(_INTERNAL_ERROR)).encode()),
        ],
    }
    body: HTTPResponseBodyEvent = {
        "type": "http.response.body",
        "body": _INTERNAL_ERROR,
        "more_body": False,
    }
    await send(start)
    await send(body)
