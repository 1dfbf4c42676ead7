"""The dashboard's read-only pages of what runs the jobs: the worker processes alive now
(`/ui/workers`, refreshed in place), the periodic schedules (`/ui/periodic`) and the job
types (`/ui/types`). Each reads what its API route reads (`GET /workers`, `/periodic`,
`/types`): the same services, the same statements."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any, Final

from litestar import Controller, Request, get
from litestar.datastructures import CacheControlHeader
from litestar.di import NamedDependency
from litestar.response import Template

from jobqueue.domain.periodic import next_slots
from jobqueue.entrypoints.http.middleware import DASHBOARD
from jobqueue.entrypoints.http.periodic_routes import Schedules
from jobqueue.entrypoints.http.ui.frame import PAGE_HEADERS, UI_PATH, DashboardAccess, page
from jobqueue.entrypoints.http.ui.registry_rows import (
    periodic_rows,
    ran_elsewhere,
    type_cards,
    worker_rows,
)
from jobqueue.entrypoints.http.worker_routes import Workers
from jobqueue.entrypoints.service.published_types import TypeCatalogue

# How often the workers table asks for itself again: a heartbeat comes every third of a
# lease, so a few seconds shows each one.
WORKERS_REFRESH_SECONDS: Final = 5

_SIGNED_IN: Final = {DASHBOARD: True}


class RegistryPagesController(Controller):
    path = UI_PATH
    include_in_schema = False
    response_headers = PAGE_HEADERS
    cache_control = CacheControlHeader(no_store=True)

    @get("/workers", name="ui-workers", opt=_SIGNED_IN)
    async def workers(
        self,
        request: Request[Any, Any, Any],
        workers: NamedDependency[Workers | None],
        access: NamedDependency[DashboardAccess],
    ) -> Template:
        return page(request, access, "workers.html", await _workers(workers))

    @get("/fragments/workers", name="ui-workers-fragment", opt=_SIGNED_IN)
    async def workers_fragment(self, workers: NamedDependency[Workers | None]) -> Template:
        """The workers table alone, which the page asks for every few seconds."""
        return Template(template_name="fragments/workers.html", context=await _workers(workers))

    @get("/periodic", name="ui-periodic", opt=_SIGNED_IN)
    async def periodic(
        self,
        request: Request[Any, Any, Any],
        periodic: NamedDependency[Schedules],
        access: NamedDependency[DashboardAccess],
    ) -> Template:
        now = datetime.fromtimestamp(time.time(), UTC)
        last = await periodic.slots.last_slots()
        context = {
            "rows": periodic_rows(next_slots(periodic.entries, now), last, periodic.options, now),
            "others": ran_elsewhere(last, {job.name for job, _ in periodic.entries}),
        }
        return page(request, access, "periodic.html", context)

    @get("/types", name="ui-types", opt=_SIGNED_IN)
    async def types(
        self,
        request: Request[Any, Any, Any],
        types: NamedDependency[TypeCatalogue],
        access: NamedDependency[DashboardAccess],
    ) -> Template:
        known = await types.fresh()
        return page(request, access, "types.html", {"cards": type_cards(known.described())})


async def _workers(workers: Workers | None) -> dict[str, object]:
    return {
        # None: this app was given no registry (a test's in-memory store).
        "tracked": workers is not None,
        "rows": [] if workers is None else worker_rows(await workers.registry.live()),
        "refresh_seconds": WORKERS_REFRESH_SECONDS,
    }
