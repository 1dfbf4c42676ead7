"""The OpenAPI document's parts that no route declares: what the service adds to every
response outside the routes (the request id, the 401 of the token guard, the router's
405, the last-resort 500, `Retry-After` on a 503), and the docs page with its assets
served by the service itself, so that it renders with no network.

Routes declare their own statuses (`parameters.error_spec`); this adds the rest once, to
the document Litestar built, in one pass over its operations.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from litestar.datastructures import CacheControlHeader
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.openapi.spec import (
    OpenAPI,
    OpenAPIHeader,
    OpenAPIMediaType,
    OpenAPIResponse,
    OpenAPIType,
    Operation,
    PathItem,
    Reference,
    Schema,
)
from litestar.router import Router
from litestar.static_files import create_static_files_router

from jobqueue.entrypoints.http.middleware import MAX_REQUEST_ID_LENGTH, PUBLIC, REQUEST_ID_HEADER

DOCS_PATH = "/schema"
# Where the docs page loads its scripts and styles from: this service.
ASSETS_PATH = f"{DOCS_PATH}/assets"
# The Swagger UI files the page needs, from the `swagger-ui-py` distribution (Swagger UI
# 5, which reads OpenAPI 3.1 documents such as Litestar's; 4.x cannot).
_ASSETS = (
    "swagger-ui-bundle.js",
    "swagger-ui-standalone-preset.js",
    "swagger-ui.css",
    "favicon-32x32.png",
)

_ERROR = Reference(ref="#/components/schemas/ErrorBody")
_REQUEST_ID = OpenAPIHeader(
    schema=Schema(type=OpenAPIType.STRING, max_length=MAX_REQUEST_ID_LENGTH),
    description="The request's id: the caller's own X-Request-ID when it sent a usable one "
    "(visible ASCII, at most 128 characters), else a new one. Every log line the request "
    "causes carries it.",
)
_RETRY_AFTER = OpenAPIHeader(
    schema=Schema(type=OpenAPIType.INTEGER, minimum=0),
    description="Seconds to wait before trying again.",
)
_WWW_AUTHENTICATE = OpenAPIHeader(
    schema=Schema(type=OpenAPIType.STRING), description="`Bearer`, and why a token was refused."
)
_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def _error(description: str, **headers: OpenAPIHeader) -> OpenAPIResponse:
    return OpenAPIResponse(
        description=description,
        content={"application/json": OpenAPIMediaType(schema=_ERROR)},
        headers={REQUEST_ID_HEADER: _REQUEST_ID, **headers},
    )


def complete(document: OpenAPI) -> OpenAPI:
    """`document` with every operation's cross-cutting responses and headers added."""
    for item in (document.paths or {}).values():
        for operation in _operations(item):
            _complete(operation)
    return document


def _operations(item: PathItem) -> list[Operation]:
    found = (getattr(item, method) for method in _METHODS)
    return [operation for operation in found if isinstance(operation, Operation)]


def _complete(operation: Operation) -> None:
    responses = operation.responses if operation.responses is not None else {}
    operation.responses = responses
    # A route declares the headers of its success response; another 2xx it may answer
    # instead (a replay's 200 for a 201) carries the same.
    declared = [
        response.headers or {}
        for code, response in responses.items()
        if code.startswith("2") and isinstance(response, OpenAPIResponse)
    ]
    success = {name: header for headers in declared for name, header in headers.items()}
    for code, response in responses.items():
        if isinstance(response, OpenAPIResponse):
            own = {**success, **(response.headers or {})} if code.startswith("2") else {}
            response.headers = {**(response.headers or {}), **own, REQUEST_ID_HEADER: _REQUEST_ID}
            for header in response.headers.values():
                # Litestar writes a route's `ResponseHeader` with no schema, which OpenAPI
                # requires: the headers it declares are all text.
                if isinstance(header, OpenAPIHeader) and header.schema is None:
                    header.schema = Schema(type=OpenAPIType.STRING)
    if "503" in responses and isinstance(responses["503"], OpenAPIResponse):
        headers = responses["503"].headers or {}
        responses["503"].headers = {**headers, "Retry-After": _RETRY_AFTER}
    if operation.security:
        responses.setdefault(
            "401",
            _error(
                "No bearer token, or not one of API_TOKENS",
                **{"WWW-Authenticate": _WWW_AUTHENTICATE},
            ),
        )
    responses.setdefault(
        "405",
        _error("This path has no route for the method sent (the Allow header lists those it has)"),
    )
    responses.setdefault(
        "500",
        _error(
            "A failure of the service's own; the body's request_id (also the X-Request-ID "
            "header) finds its traceback in the log"
        ),
    )


def docs_page() -> SwaggerRenderPlugin:
    """The Swagger UI page at `/schema/swagger` (and `/schema`), loading its assets from
    this service."""
    return SwaggerRenderPlugin(
        js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
        css_url=f"{ASSETS_PATH}/swagger-ui.css",
        standalone_preset_js_url=f"{ASSETS_PATH}/swagger-ui-standalone-preset.js",
        favicon=f"<link rel='icon' type='image/png' href='{ASSETS_PATH}/favicon-32x32.png'>",
        path="/swagger",
    )


def docs_assets() -> Router:
    """The docs page's scripts and styles, open like the page (they hold nothing of ours)
    and cached by browsers for a day."""
    return create_static_files_router(
        path=ASSETS_PATH,
        directories=[_assets_directory()],
        opt={PUBLIC: True},
        include_in_schema=False,
        cache_control=CacheControlHeader(max_age=86400, public=True),
        name="docs-assets",
    )


def _assets_directory() -> Path:
    # Found without importing the package: its __init__ loads Jinja2 and PyYAML for
    # handlers of other frameworks, which this service does not use.
    spec = importlib.util.find_spec("swagger_ui")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the swagger-ui-py distribution (the docs page's assets) is missing")
    directory = Path(next(iter(spec.submodule_search_locations))) / "static"
    missing = [name for name in _ASSETS if not (directory / name).is_file()]
    if missing:
        raise RuntimeError(f"swagger-ui-py lacks the docs page's {', '.join(missing)}")
    return directory


def documented_assets() -> tuple[str, ...]:
    """The asset URLs the docs page loads (tests fetch each)."""
    return tuple(f"{ASSETS_PATH}/{name}" for name in _ASSETS)
