"""Errors on the dashboard's paths as a page a person reads, not JSON.

The API's handlers (`http/errors.py`) still decide every status, message and header, and
log what they log; for a path under `/ui` their answer is rendered as HTML instead. Never
a traceback: a failure of the service's own shows its request id, which finds it in the
log.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any
from urllib.parse import urlencode

import msgspec
from litestar import MediaType, Request, Response
from litestar.response import Redirect, Template
from litestar.status_codes import (
    HTTP_303_SEE_OTHER,
    HTTP_401_UNAUTHORIZED,
    HTTP_500_INTERNAL_SERVER_ERROR,
)
from litestar.types import ExceptionHandlersMap

from jobqueue.entrypoints.http.ui.frame import (
    SIGN_IN_PATH,
    UI_PATH,
    is_dashboard_path,
    page_headers,
)
from jobqueue.wire.records import ErrorBody


def html_on_dashboard_paths(handlers: ExceptionHandlersMap) -> ExceptionHandlersMap:
    """`handlers`, each answering a dashboard path's request with an HTML page."""
    return {error: _as_page(handler) for error, handler in handlers.items()}


def _as_page(handler: Any) -> Any:
    def handle(request: Request[Any, Any, Any], error: Exception) -> Response[Any]:
        answer: Response[Any] = handler(request, error)
        if not is_dashboard_path(request.url.path) or not isinstance(answer.content, ErrorBody):
            return answer
        body = answer.content
        # Every handler of ours sets one; Litestar's type allows none.
        status = answer.status_code or HTTP_500_INTERNAL_SERVER_ERROR
        if status == HTTP_401_UNAUTHORIZED:
            return _to_sign_in(request)
        return Template(
            template_name="error.html",
            context={
                "status_code": status,
                "reason": _reason(status),
                "message": body.error,
                "request_id": None if body.request_id is msgspec.UNSET else body.request_id,
            },
            status_code=status,
            headers={**answer.headers, **page_headers()},
            media_type=MediaType.HTML,
        )

    return handle


def _to_sign_in(request: Request[Any, Any, Any]) -> Response[Any]:
    """A person without a session is sent to sign in, and brought back after. An htmx
    request (a fragment's refresh) is told to send the whole page there."""
    back = request.url.path if request.method == "GET" else UI_PATH
    target = f"{SIGN_IN_PATH}?{urlencode({'next': back})}"
    if request.headers.get("hx-request"):
        return Response(
            content=b"", status_code=HTTP_401_UNAUTHORIZED, headers={"HX-Redirect": target}
        )
    return Redirect(target, status_code=HTTP_303_SEE_OTHER)


def _reason(status_code: int) -> str:
    try:
        return HTTPStatus(status_code).phrase
    except ValueError:
        # The access log's 499 (client went away) has no phrase of its own.
        return "Error"
