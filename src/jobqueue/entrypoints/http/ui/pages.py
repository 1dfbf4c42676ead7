"""The dashboard's routes (`/ui`), its templates and its static assets.

Pages are rendered on the server by Jinja2 with autoescaping on: queue names, job types,
payloads and errors are user data and are never written unescaped. Every asset is a file
of this package, served by the service (no CDN, no build step), and the Content-Security
Policy lets a page load nothing from anywhere else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Final
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from litestar import Controller, Request, Router, get
from litestar.datastructures import CacheControlHeader
from litestar.di import NamedDependency
from litestar.exceptions import NotFoundException
from litestar.params import QueryParameter
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.response import Template
from litestar.static_files import create_static_files_router
from litestar.template import TemplateConfig

from jobqueue.domain.status import COUNTED
from jobqueue.entrypoints.http.middleware import DASHBOARD, PUBLIC
from jobqueue.entrypoints.http.service import QueueService
from jobqueue.entrypoints.http.ui.frame import (
    PAGE_HEADERS,
    STATIC_PATH,
    UI_PATH,
    DashboardAccess,
    csrf_token,
    page,
)
from jobqueue.entrypoints.http.ui.overview import COUNTS_MAX_AGE, REFRESH_SECONDS, queue_rows
from jobqueue.entrypoints.http.ui.throughput import ThroughputCharts, chosen_queue

# With API_TOKENS, a session cookie (`session.py`) opens these pages.
_SIGNED_IN: Final = {DASHBOARD: True}

# The queue the charts are filtered to (`?queue=`; empty or absent: every queue).
ChartQueue = Annotated[str | None, QueryParameter(required=False)]

_HERE = Path(__file__).parent
STATIC_DIRECTORY: Final = _HERE / "static"


def template_config(
    version: str, *, read_only: bool = False, trace_url: str | None = None
) -> TemplateConfig[JinjaTemplateEngine]:
    """The dashboard's templates, autoescaped, failing on a name the context lacks.

    `read_only` pages show no action's form (`actions.py` refuses them anyway);
    `trace_link(trace_id)` is the trace's URL under `trace_url`, or None without one."""
    environment = Environment(
        loader=FileSystemLoader(_HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
    )
    environment.globals.update(
        version=version,
        ui_path=UI_PATH,
        # The version in an asset's URL: assets are cached for a year, and an upgrade's
        # pages ask for new URLs.
        static=lambda name: f"{STATIC_PATH}/{name}?v={version}",
        read_only=read_only,
        trace_link=lambda trace_id: trace_href(trace_url, trace_id),
    )
    return TemplateConfig(
        engine=JinjaTemplateEngine.from_environment(environment),
    )


def trace_href(template: str | None, trace_id: str | None) -> str | None:
    """`template` with `trace_id` in it (quoted: it is data), or None without either."""
    if template is None or not trace_id:
        return None
    return template.replace("{trace_id}", quote(trace_id, safe=""))


class DashboardController(Controller):
    path = UI_PATH
    include_in_schema = False
    response_headers = PAGE_HEADERS
    # Live numbers: never served from a cache.
    cache_control = CacheControlHeader(no_store=True)

    @get("/", name="ui-overview", opt=_SIGNED_IN)
    async def overview(
        self,
        request: Request[Any, Any, Any],
        queues: NamedDependency[QueueService],
        access: NamedDependency[DashboardAccess],
        throughput: NamedDependency[ThroughputCharts],
        queue: ChartQueue = None,
    ) -> Template:
        chosen = chosen_queue(queue)
        context = {**await _queues(queues), **await throughput.context(chosen)}
        return page(request, access, "overview.html", context)

    @get("/fragments/queues", name="ui-queues-fragment", opt=_SIGNED_IN)
    async def queues_fragment(
        self, request: Request[Any, Any, Any], queues: NamedDependency[QueueService]
    ) -> Template:
        """The overview's table alone, which the page asks for every few seconds (its
        pause buttons' forms carry the CSRF token)."""
        csrf, cookies = csrf_token(request)
        return Template(
            template_name="fragments/queues.html",
            context={**await _queues(queues), "csrf": csrf},
            cookies=cookies,
        )

    @get("/fragments/charts", name="ui-charts-fragment", opt=_SIGNED_IN)
    async def charts_fragment(
        self, throughput: NamedDependency[ThroughputCharts], queue: ChartQueue = None
    ) -> Template:
        """The overview's charts alone, which the page asks for every few seconds; none
        (404) on a service without a rollup."""
        context = await throughput.context(chosen_queue(queue))
        if context["charts"] is None:
            raise NotFoundException("this service keeps no rollup to chart")
        return Template(template_name="fragments/charts.html", context=context)


async def _queues(queues: QueueService) -> dict[str, object]:
    return {
        "rows": queue_rows(await queues.summaries(COUNTS_MAX_AGE)),
        "statuses": COUNTED,
        "refresh_seconds": REFRESH_SECONDS,
    }


def static_assets() -> Router:
    """htmx, its licence and the stylesheet: open (they hold nothing of ours), and cached
    for a year, their URLs carrying the version."""
    return create_static_files_router(
        path=STATIC_PATH,
        directories=[STATIC_DIRECTORY],
        opt={PUBLIC: True},
        include_in_schema=False,
        cache_control=CacheControlHeader(max_age=365 * 86400, public=True),
        name="ui-static",
    )
