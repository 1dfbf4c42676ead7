"""Where a process listens: the API's address and the separate metrics server's."""

from __future__ import annotations

from jobqueue.entrypoints.config.settings import Settings
from jobqueue.entrypoints.config.variables import (
    API_HTTP_ADDR,
    SERVE_HTTP_ADDR,
    WORKER_METRICS_ADDR,
    HttpAddress,
)


def api_listener(settings: Settings, *, with_workers: bool) -> HttpAddress:
    """HTTP_ADDR, else loopback for `serve` (`with_workers`), all interfaces for `api`."""
    return settings.http_addr or (SERVE_HTTP_ADDR if with_workers else API_HTTP_ADDR)


def metrics_listener(settings: Settings, *, serves_api: bool) -> HttpAddress | None:
    """Where the separate metrics server listens, or None for no such server.

    Unset, it runs only in a process without the API (`jobqueue worker`): the API serves
    the same endpoints on HTTP_ADDR.
    """
    if isinstance(settings.metrics_addr, HttpAddress):
        return settings.metrics_addr
    if settings.metrics_addr is None and not serves_api:
        return WORKER_METRICS_ADDR
    return None
