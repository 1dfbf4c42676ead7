"""The checks a request passes before its route runs: the bearer token (a guard), and
what a browser may write (a `before_request` hook).

Both are coroutines: Litestar runs a synchronous guard in a worker thread, a hop that
cost as much CPU as the rest of a submission's HTTP handling (measured); these do no
I/O, so they run inline. Which routes they spare is said by the route's `opt`
(`middleware.PUBLIC`, `DASHBOARD`, `FORM`).
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any, Final

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.exceptions import HTTPException, NotAuthorizedException, PermissionDeniedException
from litestar.handlers.base import BaseRouteHandler
from litestar.status_codes import HTTP_415_UNSUPPORTED_MEDIA_TYPE

from jobqueue.entrypoints.http.middleware import DASHBOARD, FORM, PUBLIC
from jobqueue.entrypoints.http.ui.session import SESSION_COOKIE, token_matches
from jobqueue.entrypoints.http.ui.session import read as read_session

Connection = ASGIConnection[Any, Any, Any, Any]

# Methods that change something (the API reads a body on some of them).
_WRITES: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# What a browser says of a request another site's page made (`Sec-Fetch-Site`): a
# different site, or a different origin of this one (another port of localhost is
# "same-site"). `same-origin`, `none` (typed, bookmarked) and no header (not a browser,
# or one too old to send it) go on.
_FOREIGN: Final = frozenset({"cross-site", "same-site"})
CROSS_SITE = (
    "a page of another origin may not change anything here: call the API from your own "
    "code, or use the dashboard of this service"
)


class BearerTokenGuard:
    """Refuses requests without `Authorization: Bearer <one of the tokens>` (401).

    Tokens are compared in constant time, all of them every time, so neither the
    position of a match nor a common prefix shows in the response time.
    """

    def __init__(self, tokens: Collection[str]) -> None:
        self._tokens = [token.encode() for token in tokens]

    async def __call__(self, connection: Connection, handler: BaseRouteHandler) -> None:
        if handler.opt.get(PUBLIC):
            return
        presented = _bearer_token(connection.headers.get("authorization"))
        if presented is None and handler.opt.get(DASHBOARD):
            signed = connection.cookies.get(SESSION_COOKIE)
            if read_session(signed, self._tokens, time.time()) is not None:
                return
            raise NotAuthorizedException(detail="sign in to see the dashboard")
        if presented is None:
            raise NotAuthorizedException(
                detail="missing bearer token: send 'Authorization: Bearer <token>'",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if not token_matches(presented, self._tokens):
            raise NotAuthorizedException(
                detail="invalid bearer token",
                headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
            )


def _bearer_token(header: str | None) -> str | None:
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


async def refuse_unsafe_writes(request: Request[Any, Any, Any]) -> None:
    """Refuses a write a browser made for another origin's page (403), and a body that is
    not JSON (415) but on the routes that take a form and check its CSRF token.

    A page may make a browser send a "simple" request (a form, or `fetch` with no-cors)
    to any address without asking first: to a service on the user's own machine, with no
    token, a POST would pause a queue or cancel a job, and a `text/plain` body parsed as
    a job would submit it. The API answers no CORS preflight, so no legitimate page of
    another origin writes here anyway; the JSON rule also covers browsers too old to send
    `Sec-Fetch-Site`.

    Run as the app's `before_request` hook, after routing and the guards: one call, not a
    guard's copy of the route handler per request.
    """
    if request.scope.get("method") not in _WRITES:
        return
    headers = request.headers
    if headers.get("sec-fetch-site", "") in _FOREIGN:
        raise PermissionDeniedException(detail=CROSS_SITE)
    if request.route_handler.opt.get(FORM):
        return
    has_body = headers.get("content-length", "0").strip() not in ("", "0") or (
        "transfer-encoding" in headers
    )
    if not has_body:
        return
    media_type = headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != "application/json" and not media_type.endswith("+json"):
        shown = media_type or "none"
        raise HTTPException(
            status_code=HTTP_415_UNSUPPORTED_MEDIA_TYPE,
            detail=f"send the body as JSON with Content-Type: application/json (got {shown})",
        )
