"""A server span for every request, continuing the caller's W3C `traceparent`.

Litestar's OpenTelemetry middleware (its `OpenTelemetryConfig`) does the work. It is
wrapped around the whole application, outside the request-id middleware, instead of
being installed with `OpenTelemetryPlugin`, which would put it inside: then the access
log line, written after the response, would not carry the request's trace id.
"""

from __future__ import annotations

from typing import Any

from litestar.enums import ScopeType
from litestar.plugins.opentelemetry import OpenTelemetryConfig
from litestar.types import ASGIApp, Message, Receive, Scope, Send
from opentelemetry import trace

# Probes and scrapes arrive every few seconds from infrastructure; a trace each would
# bury the requests people look for.
UNTRACED_PATHS = ("/healthz", "/readyz", "/metrics")
_HTTP_ROUTE = "http.route"


def traced(app: ASGIApp, provider: trace.TracerProvider) -> ASGIApp:
    """`app` with a server span per request, from `provider` (never the global one)."""
    config = OpenTelemetryConfig(
        tracer_provider=provider,
        scope_span_details_extractor=_method_only,
        exclude=[f"^{path}$" for path in UNTRACED_PATHS],
        # Spans around every ASGI send and receive say nothing the server span does not.
        exclude_spans=["receive", "send"],
        scopes={ScopeType.HTTP},
    )
    return config.middleware(_RouteNaming(app))


def _method_only(scope: Scope) -> tuple[str, dict[str, Any]]:
    # The route is not known yet when the span starts, and the raw path (holding job
    # ids) would give every request a span name of its own; `_RouteNaming` renames it.
    return str(scope.get("method", "HTTP")), {}


class _RouteNaming:
    """Names the current server span `METHOD /route/{param}` once routing has happened,
    as HTTP semantic conventions ask: low-cardinality, the same for every job."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        span = trace.get_current_span()
        if not span.is_recording():
            await self._app(scope, receive, send)
            return

        async def naming_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                # Set by Litestar's router on this same scope; absent for a 404.
                template = scope.get("path_template")
                if template:
                    span.update_name(f"{scope.get('method', 'HTTP')} {template}")
                    span.set_attribute(_HTTP_ROUTE, template)
            await send(message)

        await self._app(scope, receive, naming_send)
