"""Probes and the scrape endpoint: open without a token, cheap, and honest.

The API and the METRICS_ADDR listener serve them alike: `OPERATIONS` with the
dependencies of `operations_dependencies`.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any, Protocol, runtime_checkable

from litestar import MediaType, Response, get
from litestar.di import NamedDependency, Provide
from litestar.exceptions import ServiceUnavailableException
from litestar.openapi.datastructures import ResponseSpec

from jobqueue.domain.errors import StoreError, StoreUnavailable
from jobqueue.domain.ports import JobStore
from jobqueue.entrypoints.http.middleware import PUBLIC
from jobqueue.wire.records import ErrorBody, HealthBody

_log = logging.getLogger("jobqueue.http")


# Runtime-checkable: Litestar checks a dependency against its parameter's annotation.
@runtime_checkable
class Exposition(Protocol):
    """The metrics `/metrics` serves (`adapters.telemetry.metrics.Metrics` is one)."""

    @property
    def content_type(self) -> str:
        """The media type of the exposition text, as scrapers expect it."""
        ...

    def render(self) -> bytes:
        """The exposition text of every metric."""
        ...


class Readiness:
    """Whether this process should receive traffic: its store answers and it is not
    shutting down. Draining is one-way: a process never becomes ready again."""

    def __init__(self, store: JobStore, *, timeout: timedelta = timedelta(seconds=2)) -> None:
        self._store = store
        self._timeout = timeout
        self._draining = False

    @property
    def draining(self) -> bool:
        return self._draining

    def drain(self) -> None:
        self._draining = True

    async def problem(self) -> str | None:
        """None when ready, else why not."""
        if self._draining:
            return "shutting down"
        try:
            async with asyncio.timeout(self._timeout.total_seconds()):
                await self._store.ping()
        except TimeoutError:
            return f"database did not answer within {self._timeout.total_seconds():g}s"
        except StoreUnavailable as error:
            # The probe is open to anyone: the driver's message (hosts, ports) goes to
            # the log only.
            _log.warning("readiness check failed", extra={"error": str(error)})
            return "database unreachable"
        except StoreError as error:
            # Reached, but refusing us (a role without rights, say): not ready either,
            # and an operator's to fix, so logged as an error.
            _log.error("readiness check failed", extra={"error": str(error)})
            return "database refused the check"
        return None


@get(
    "/healthz",
    tags=["operations"],
    summary="Liveness: the process answers; checks no dependency",
    opt={PUBLIC: True},
    sync_to_thread=False,
)
def healthz() -> HealthBody:
    return HealthBody(status="ok")


@get(
    "/readyz",
    tags=["operations"],
    summary="Readiness: the database answers and the process is not shutting down",
    opt={PUBLIC: True},
    responses={503: ResponseSpec(ErrorBody, description="Not ready; `error` says why")},
)
async def readyz(readiness: NamedDependency[Readiness]) -> HealthBody:
    problem = await readiness.problem()
    if problem is not None:
        raise ServiceUnavailableException(detail=f"not ready: {problem}")
    return HealthBody(status="ready")


@get(
    "/metrics",
    tags=["operations"],
    summary="Prometheus metrics in the text exposition format",
    media_type=MediaType.TEXT,
    opt={PUBLIC: True},
    sync_to_thread=False,
)
def metrics_endpoint(metrics: NamedDependency[Exposition]) -> Response[bytes]:
    return Response(metrics.render(), media_type=_without_charset(metrics.content_type))


def _without_charset(media_type: str) -> str:
    # Litestar appends "; charset=utf-8" to every text/ media type it is given: one that
    # names it already would carry it twice.
    kept = [part for part in media_type.split(";") if not part.strip().startswith("charset=")]
    return ";".join(kept).strip()


OPERATIONS = (healthz, readyz, metrics_endpoint)


def operations_dependencies(readiness: Readiness, metrics: Exposition) -> dict[str, Provide]:
    """What the routes of `OPERATIONS` are given."""
    return {"readiness": constant(readiness), "metrics": constant(metrics)}


def constant(value: Any) -> Provide:
    """A dependency that is `value` itself, the same for every request."""

    def provide() -> Any:
        return value

    return Provide(provide, use_cache=True, sync_to_thread=False)
