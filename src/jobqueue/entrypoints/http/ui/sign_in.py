"""Signing in to the dashboard and out of it (`session.py` says how a session is kept).

Both forms are open (a person without a session must reach them) and each checks its
CSRF token: a sign-in forced by another site's form would put the person in a session
of the attacker's choosing; a sign-out, end theirs.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Final

from litestar import Controller, Request, Response, get, post
from litestar.datastructures import CacheControlHeader
from litestar.di import NamedDependency
from litestar.params import QueryParameter
from litestar.response import Redirect, Template
from litestar.status_codes import HTTP_303_SEE_OTHER, HTTP_401_UNAUTHORIZED, HTTP_403_FORBIDDEN

from jobqueue.entrypoints.http.middleware import FORM, PUBLIC
from jobqueue.entrypoints.http.ui.frame import (
    PAGE_HEADERS,
    SIGN_IN_PATH,
    UI_PATH,
    DashboardAccess,
    cookie,
    csrf_token,
)
from jobqueue.entrypoints.http.ui.session import (
    CSRF_COOKIE,
    CSRF_FIELD,
    SESSION_COOKIE,
    SESSION_LIFETIME,
    csrf_matches,
    issue,
    token_matches,
)

# Open to a person without a session; a form's body, its CSRF token checked here.
_OPEN_FORM: Final = {PUBLIC: True, FORM: True}


def landing(wanted: str | None) -> str:
    """Where to go after signing in: a dashboard path only, never another site."""
    if wanted and wanted.startswith(UI_PATH) and not wanted.startswith("//"):
        return wanted
    return UI_PATH


class SignInController(Controller):
    path = UI_PATH
    include_in_schema = False
    response_headers = PAGE_HEADERS
    cache_control = CacheControlHeader(no_store=True)

    @get("/sign-in", name="ui-sign-in-form", opt=_OPEN_FORM)
    async def form(
        self,
        request: Request[Any, Any, Any],
        access: NamedDependency[DashboardAccess],
        wanted: Annotated[str | None, QueryParameter(name="next", required=False)] = None,
    ) -> Response[Any]:
        if not access.tokens:
            return Redirect(landing(wanted), status_code=HTTP_303_SEE_OTHER)
        return _sign_in_page(request, landing(wanted), None)

    @post("/sign-in", name="ui-sign-in", status_code=HTTP_303_SEE_OTHER, opt=_OPEN_FORM)
    async def sign_in(
        self, request: Request[Any, Any, Any], access: NamedDependency[DashboardAccess]
    ) -> Response[Any]:
        form = await request.form()
        wanted = landing(form.get("next"))
        if not csrf_matches(request.cookies.get(CSRF_COOKIE), form.get(CSRF_FIELD)):
            return _sign_in_page(
                request, wanted, "The form had expired; sign in again.", HTTP_403_FORBIDDEN
            )
        token = str(form.get("token") or "").strip()
        if not token_matches(token, access.tokens):
            return _sign_in_page(
                request,
                wanted,
                "That is not one of the service's API_TOKENS.",
                HTTP_401_UNAUTHORIZED,
            )
        session = issue(token, time.time())
        return Redirect(
            wanted,
            status_code=HTTP_303_SEE_OTHER,
            cookies=[
                cookie(
                    SESSION_COOKIE,
                    session,
                    request,
                    max_age=int(SESSION_LIFETIME.total_seconds()),
                )
            ],
        )

    @post("/sign-out", name="ui-sign-out", status_code=HTTP_303_SEE_OTHER, opt=_OPEN_FORM)
    async def sign_out(self, request: Request[Any, Any, Any]) -> Response[Any]:
        form = await request.form()
        if not csrf_matches(request.cookies.get(CSRF_COOKIE), form.get(CSRF_FIELD)):
            return _sign_in_page(
                request, UI_PATH, "The form had expired: you are still signed in.", 403
            )
        return Redirect(
            SIGN_IN_PATH,
            status_code=HTTP_303_SEE_OTHER,
            cookies=[cookie(SESSION_COOKIE, "", request, max_age=0)],
        )


def _sign_in_page(
    request: Request[Any, Any, Any], wanted: str, problem: str | None, status: int = 200
) -> Template:
    csrf, cookies = csrf_token(request)
    return Template(
        template_name="sign_in.html",
        context={"csrf": csrf, "next": wanted, "problem": problem, "signed_in": False},
        status_code=status,
        cookies=cookies,
    )
