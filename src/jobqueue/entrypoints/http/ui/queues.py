"""A queue's page (`/ui/queues/{name}`), pausing and resuming a queue from it or from the
overview, and setting its limits from it (every field empty lifts them).

A queue exists as soon as a job names it, so a valid name nothing has named yet is a
running queue of no jobs, not a 404; a name no queue may have is a 400. Pausing is not
destructive (resuming undoes it), so it asks for no confirmation: one form, one button,
then back to the page it was pressed on (303).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlencode

from litestar import Controller, Request, get, post
from litestar.datastructures import CacheControlHeader
from litestar.di import NamedDependency
from litestar.exceptions import ClientException
from litestar.response import Redirect, Template
from litestar.status_codes import HTTP_303_SEE_OTHER

from jobqueue.domain.flow import QueueLimits, TypeRates, parse_type_rates
from jobqueue.domain.processes import LiveProcess
from jobqueue.domain.status import BY_QUEUE, COUNTED, Status
from jobqueue.entrypoints.http.middleware import DASHBOARD
from jobqueue.entrypoints.http.queue_routes import QueueNameParameter, parse_queue_name
from jobqueue.entrypoints.http.service import QueueService
from jobqueue.entrypoints.http.ui.actions import ACTION, action_form
from jobqueue.entrypoints.http.ui.bulk import BulkAction, BulkLink, bulk_links
from jobqueue.entrypoints.http.ui.frame import PAGE_HEADERS, UI_PATH, DashboardAccess, page
from jobqueue.entrypoints.http.ui.overview import (
    COUNTS_MAX_AGE,
    QUEUES_PATH,
    TYPE_RATES_APART,
    QueueRow,
    queue_href,
    queue_rows,
)
from jobqueue.entrypoints.http.ui.sign_in import landing
from jobqueue.entrypoints.http.worker_routes import Workers

# The dashboard's browser of jobs (its own module serves it).
JOBS_PATH: Final = f"{UI_PATH}/jobs"

# With API_TOKENS, a session cookie opens the page, as every page of the dashboard.
_SIGNED_IN: Final = {DASHBOARD: True}


def jobs_href(status: Status, queue: str) -> str:
    return f"{JOBS_PATH}?{urlencode({'status': status.value, 'queue': queue})}"


@dataclass(frozen=True, slots=True)
class Listing:
    status: Status
    href: str


@dataclass(frozen=True, slots=True)
class QueuePage:
    row: QueueRow
    # The live processes that claim from it.
    consumers: Sequence[LiveProcess] | None
    # Its jobs by status, where a listing can be narrowed to a queue.
    listings: Sequence[Listing]
    bulk: Mapping[BulkAction, Sequence[BulkLink]]


def queue_page(row: QueueRow, consumers: Sequence[LiveProcess] | None) -> QueuePage:
    return QueuePage(
        row=row,
        consumers=consumers,
        listings=[Listing(status, jobs_href(status, row.name)) for status in BY_QUEUE],
        bulk=bulk_links(queue=row.name),
    )


class QueuePagesController(Controller):
    path = QUEUES_PATH
    include_in_schema = False
    response_headers = PAGE_HEADERS
    cache_control = CacheControlHeader(no_store=True)

    @get("/{name:str}", name="ui-queue", opt=_SIGNED_IN)
    async def queue(
        self,
        request: Request[Any, Any, Any],
        name: QueueNameParameter,
        queues: NamedDependency[QueueService],
        workers: NamedDependency[Workers | None],
        access: NamedDependency[DashboardAccess],
    ) -> Template:
        valid = parse_queue_name(name)
        (row,) = queue_rows([await queues.summary(valid, COUNTS_MAX_AGE)])
        consumers = None
        if workers is not None:
            live = await workers.registry.live()
            consumers = [each for each in live if valid in each.info.queues]
        context = {"queue": queue_page(row, consumers), "statuses": COUNTED}
        return page(request, access, "queue.html", context)

    @post("/{name:str}/pause", name="ui-queue-pause", opt=ACTION, status_code=HTTP_303_SEE_OTHER)
    async def pause(
        self,
        request: Request[Any, Any, Any],
        name: QueueNameParameter,
        queues: NamedDependency[QueueService],
        access: NamedDependency[DashboardAccess],
    ) -> Redirect:
        form = await action_form(request, access)
        await queues.pause(parse_queue_name(name))
        return Redirect(landing(form.get("next")), status_code=HTTP_303_SEE_OTHER)

    @post("/{name:str}/resume", name="ui-queue-resume", opt=ACTION, status_code=HTTP_303_SEE_OTHER)
    async def resume(
        self,
        request: Request[Any, Any, Any],
        name: QueueNameParameter,
        queues: NamedDependency[QueueService],
        access: NamedDependency[DashboardAccess],
    ) -> Redirect:
        form = await action_form(request, access)
        await queues.resume(parse_queue_name(name))
        return Redirect(landing(form.get("next")), status_code=HTTP_303_SEE_OTHER)

    @post("/{name:str}/limits", name="ui-queue-limits", opt=ACTION, status_code=HTTP_303_SEE_OTHER)
    async def limits(
        self,
        request: Request[Any, Any, Any],
        name: QueueNameParameter,
        queues: NamedDependency[QueueService],
        access: NamedDependency[DashboardAccess],
    ) -> Redirect:
        form = await action_form(request, access)
        queue = parse_queue_name(name)
        await queues.set_limits(queue, _limits_from(form))
        return Redirect(queue_href(queue), status_code=HTTP_303_SEE_OTHER)


# The limits form's fields (`queue.html`), each named as its limit, and their labels;
# the types' rates are one field of their own, `type_rates`.
_LIMIT_FIELDS: Final = {
    "concurrency": "concurrency",
    "rate": "rate",
    "key_concurrency": "running per key",
    "key_rate": "starts per key",
}
_TYPE_RATES_LABEL: Final = "starts per type"


def _limits_from(form: Mapping[str, str]) -> QueueLimits:
    """The limits a queue page's form asks for (an empty field: no such limit), or a 400
    saying which field is wrong and why."""
    limits: dict[str, Any] = {}
    for field, label in _LIMIT_FIELDS.items():
        value = "".join(form.get(field, "").split())
        if not value:
            continue
        # Parsed one by one, so that the refusal names the field: "a rate limit must be
        # between …" alone would not say which of the two rates.
        try:
            limits[field] = getattr(QueueLimits.parse(f"{field}={value}"), field)
        except ValueError as error:
            raise ClientException(detail=f"invalid limits: {label}: {error}") from None
    try:
        limits["type_rates"] = _type_rates_from(form.get("type_rates", ""))
    except ValueError as error:
        raise ClientException(detail=f"invalid limits: {_TYPE_RATES_LABEL}: {error}") from None
    try:
        return QueueLimits(**limits)
    except ValueError as error:
        # Each right alone, but not together: rates per type with limits per key.
        raise ClientException(detail=f"invalid limits: {error}") from None


def _type_rates_from(text: str) -> TypeRates:
    """`send_sms:10/s, fax:1/m`: each type's rate, apart by commas (so a type whose name
    holds one is rated through the API or the CLI), spaces around each part ignored."""
    given = [each.strip() for each in text.split(TYPE_RATES_APART.strip()) if each.strip()]
    return parse_type_rates(given)
