"""Every failure as `{"error": "…"}` with the status that says whose fault it was.

Registered at the application level, the only level that sees the router's own 404 and
405. Domain errors map to statuses here and nowhere else; anything unexpected becomes a
500 whose traceback goes to the log, never to the client. A store that is unavailable
(transient: 503 with `Retry-After`) is not a store that refused a statement (a bug: 500
with the request id, logged at ERROR with its SQLSTATE).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import msgspec
from litestar import MediaType, Request, Response
from litestar.exceptions import (
    HTTPException,
    MethodNotAllowedException,
    NotFoundException,
)
from litestar.exceptions.http_exceptions import RequestEntityTooLarge
from litestar.status_codes import (
    HTTP_400_BAD_REQUEST,
    HTTP_404_NOT_FOUND,
    HTTP_409_CONFLICT,
    HTTP_500_INTERNAL_SERVER_ERROR,
    HTTP_503_SERVICE_UNAVAILABLE,
)
from litestar.types import ExceptionHandlersMap

from jobqueue.adapters.telemetry.logging import request_id_var
from jobqueue.domain.dependencies import WorkflowNotFound
from jobqueue.domain.errors import (
    IdempotencyConflict,
    InvalidJob,
    InvalidTransition,
    JobNotFound,
    StoreError,
    StoreUnavailable,
    UniqueKeyHeld,
)
from jobqueue.entrypoints.http.middleware import CLIENT_GONE, client_went_away, method_sent
from jobqueue.wire.records import ErrorBody

_log = logging.getLogger("jobqueue.http")

ExceptionHandler = Callable[[Request[Any, Any, Any], Any], Response[ErrorBody]]


def error_response(
    status_code: int, message: str, headers: Mapping[str, str] | None = None
) -> Response[ErrorBody]:
    return Response(
        ErrorBody(error=message),
        status_code=status_code,
        headers=dict(headers or {}),
        media_type=MediaType.JSON,
    )


def _domain_handler(status_code: int) -> ExceptionHandler:
    def handle(request: Request[Any, Any, Any], error: Exception) -> Response[ErrorBody]:
        return error_response(status_code, str(error))

    return handle


def _store_unavailable(request: Request[Any, Any, Any], error: Exception) -> Response[ErrorBody]:
    _log.warning("store unavailable", extra={"error": str(error)})
    return error_response(
        HTTP_503_SERVICE_UNAVAILABLE,
        "the job store is unavailable; try again shortly",
        headers={"Retry-After": "1"},
    )


def _store_error(request: Request[Any, Any, Any], error: Exception) -> Response[ErrorBody]:
    # Retrying cannot help, so never "unavailable, try again": a bug, logged as one.
    _log.error(
        "the job store refused a statement",
        exc_info=error,
        extra={
            "sqlstate": getattr(error, "sqlstate", ""),
            "method": request.method,
            "path": request.url.path,
        },
    )
    return _internal_server_error()


def _unexpected(request: Request[Any, Any, Any], error: Exception) -> Response[ErrorBody]:
    _log.error(
        "unhandled error while serving a request",
        exc_info=error,
        extra={"method": request.method, "path": request.url.path},
    )
    return _internal_server_error()


def _internal_server_error() -> Response[ErrorBody]:
    # Nothing about the failure itself: the request id finds it in the log.
    return Response(
        ErrorBody(error="internal server error", request_id=request_id_var.get() or msgspec.UNSET),
        status_code=HTTP_500_INTERNAL_SERVER_ERROR,
        media_type=MediaType.JSON,
    )


def _http_error_handler(max_body_bytes: int) -> ExceptionHandler:
    def handle(request: Request[Any, Any, Any], error: HTTPException) -> Response[ErrorBody]:
        if error.status_code == HTTP_500_INTERNAL_SERVER_ERROR:
            if client_went_away():
                # Not the server's fault, and no one is left to read an answer.
                _log.info(
                    "client went away before sending its whole request",
                    extra={"method": request.method, "path": request.url.path},
                )
                return error_response(CLIENT_GONE, "client closed the request")
            return _unexpected(request, error)
        headers = dict(error.headers or {})
        return error_response(
            error.status_code, _http_message(request, error, max_body_bytes), headers
        )

    return handle


def _http_message(
    request: Request[Any, Any, Any], error: HTTPException, max_body_bytes: int
) -> str:
    # Litestar's own texts ("Not Found", "Request Entity Too Large") do not say what to
    # change; these do.
    if isinstance(error, NotFoundException):
        return f"no route for {request.method} {_shown(request.url.path)}"
    if isinstance(error, MethodNotAllowedException):
        method = method_sent(request.method)
        return f"method {method} is not allowed on {_shown(request.url.path)}"
    if isinstance(error, RequestEntityTooLarge):
        return f"request body too large: the limit is {max_body_bytes} bytes"
    return error.detail


def _shown(path: str) -> str:
    # Echoed back to whoever sent it; a megabyte of path helps nobody read the error.
    return path if len(path) <= 200 else path[:200] + "…"


def exception_handlers(max_body_bytes: int) -> ExceptionHandlersMap:
    return {
        HTTPException: _http_error_handler(max_body_bytes),
        InvalidJob: _domain_handler(HTTP_400_BAD_REQUEST),
        JobNotFound: _domain_handler(HTTP_404_NOT_FOUND),
        WorkflowNotFound: _domain_handler(HTTP_404_NOT_FOUND),
        IdempotencyConflict: _domain_handler(HTTP_409_CONFLICT),
        InvalidTransition: _domain_handler(HTTP_409_CONFLICT),
        UniqueKeyHeld: _domain_handler(HTTP_409_CONFLICT),
        StoreUnavailable: _store_unavailable,
        StoreError: _store_error,
        Exception: _unexpected,
    }
