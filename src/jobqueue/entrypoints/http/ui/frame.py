"""What every dashboard page shares: where it lives, the headers it is sent with, the
cookies it sets, and its frame (the sign-out form and its CSRF token)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Final

from litestar import Request
from litestar.datastructures import Cookie, ResponseHeader
from litestar.response import Template

from jobqueue.entrypoints.http.ui.session import CSRF_COOKIE, new_csrf_token

UI_PATH: Final = "/ui"
STATIC_PATH: Final = f"{UI_PATH}/static"
SIGN_IN_PATH: Final = f"{UI_PATH}/sign-in"
# Nothing but this origin: the pages' own scripts, styles and fetches. No inline script or
# style either (htmx's own indicator style is turned off in the page's htmx-config).
SECURITY_POLICY: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
PAGE_HEADERS: Final = [
    ResponseHeader(name="Content-Security-Policy", value=SECURITY_POLICY),
    ResponseHeader(name="X-Content-Type-Options", value="nosniff"),
]


def is_dashboard_path(path: str) -> bool:
    return path == UI_PATH or path.startswith(f"{UI_PATH}/")


def page_headers() -> dict[str, str]:
    """The headers of every dashboard page, error pages included."""
    return {header.name: str(header.value) for header in PAGE_HEADERS}


class DashboardAccess:
    """The tokens that sign a person in (API_TOKENS; none: the dashboard is open), and
    whether a person may act or only look (DASHBOARD_READ_ONLY)."""

    def __init__(self, tokens: Collection[str], *, read_only: bool = False) -> None:
        self.tokens = [token.encode() for token in tokens]
        self.read_only = read_only


def cookie(name: str, value: str, request: Request[Any, Any, Any], max_age: int | None) -> Cookie:
    """A dashboard cookie: for /ui only, never read by a script, never sent by another
    site's page or form, and over HTTPS only when the page came over HTTPS."""
    return Cookie(
        key=name,
        value=value,
        path=UI_PATH,
        max_age=max_age,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def page(
    request: Request[Any, Any, Any],
    access: DashboardAccess,
    template: str,
    context: dict[str, object],
    status_code: int = 200,
) -> Template:
    """A full page: `context`, and what its frame needs (the sign-out form and its CSRF
    token, whose cookie is set when the browser has none yet)."""
    csrf, cookies = csrf_token(request)
    frame = {"csrf": csrf, "signed_in": bool(access.tokens)}
    return Template(
        template_name=template,
        context={**context, **frame},
        cookies=cookies,
        status_code=status_code,
    )


def csrf_token(request: Request[Any, Any, Any]) -> tuple[str, list[Cookie]]:
    """The CSRF token a page's forms carry: the browser's cookie, else a new one, with the
    cookie to set for it."""
    existing = request.cookies.get(CSRF_COOKIE)
    if existing:
        return existing, []
    fresh = new_csrf_token()
    return fresh, [cookie(CSRF_COOKIE, fresh, request, None)]
