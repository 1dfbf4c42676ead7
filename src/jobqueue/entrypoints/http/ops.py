"""`create_ops_app`: the probes and the scrape endpoint alone, for a process without the API.

`jobqueue worker` serves this on METRICS_ADDR, so Prometheus sees every worker's job
counters and Kubernetes can probe it. The routes are the API's own, with the same meaning;
nothing else is reachable here, so no token is asked for.
"""

from __future__ import annotations

from litestar import Litestar

from jobqueue.entrypoints.http.errors import exception_handlers
from jobqueue.entrypoints.http.health import (
    OPERATIONS,
    Exposition,
    Readiness,
    operations_dependencies,
)
from jobqueue.entrypoints.http.middleware import RequestContextMiddleware

# Probes and scrapes carry no body; anything larger is refused before it is read.
_MAX_BODY_BYTES = 1024


def create_ops_app(*, metrics: Exposition, readiness: Readiness) -> Litestar:
    """`/healthz`, `/readyz` (503 while `readiness` drains or the store is unreachable)
    and `/metrics` (the exposition of `metrics`, served as its `content_type`)."""
    app = Litestar(
        route_handlers=list(OPERATIONS),
        dependencies=operations_dependencies(readiness, metrics),
        exception_handlers=exception_handlers(_MAX_BODY_BYTES),
        request_max_body_size=_MAX_BODY_BYTES,
        # A listener for infrastructure, not clients: no API description to publish.
        openapi_config=None,
        # Our JSON formatter owns logging, as in the API.
        logging_config=None,
    )
    # Request ids and the access log, like every response of the API.
    app.asgi_handler = RequestContextMiddleware(app.asgi_handler)
    return app
