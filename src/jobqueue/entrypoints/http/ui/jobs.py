"""The jobs browser (`/ui/jobs`): filters in the query string, keyset pages, and the
first page's table refreshing itself.

The newest page is the only one that refreshes (htmx asks for `/ui/fragments/jobs` with
the same query string): new jobs appear at its top. A later page is a keyset range after
a position, so it stays as it was read and never jumps under the reader. A refresh
replaces the table and the page links alone, never the filter form, and htmx gives the
focus back to the element of the same id (each row's link has one).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Final

from litestar import Controller, Request, get
from litestar.datastructures import CacheControlHeader
from litestar.di import NamedDependency
from litestar.response import Template
from litestar.status_codes import HTTP_200_OK, HTTP_400_BAD_REQUEST

from jobqueue.domain.job import Job
from jobqueue.domain.listing import DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT, JobPage
from jobqueue.domain.status import TRAITS, SortColumn, Status
from jobqueue.entrypoints.http.middleware import DASHBOARD
from jobqueue.entrypoints.http.service import JobService
from jobqueue.entrypoints.http.ui.frame import PAGE_HEADERS, UI_PATH, DashboardAccess, page
from jobqueue.entrypoints.http.ui.job_filters import (
    TIME_FORMAT,
    BadFilter,
    JobsView,
    parse_filters,
)

JOBS_PATH: Final = f"{UI_PATH}/jobs"
FRAGMENT_PATH: Final = f"{UI_PATH}/fragments/jobs"
# Another page's (the bulk actions'); linked to with the listing's status, queue and type.
BULK_PATH: Final = f"{UI_PATH}/bulk"
REFRESH_SECONDS: Final = 5
PAGE_SIZES: Final = (10, 25, 50, 100, 200)
# How the time a status is ordered by reads as a column's heading.
MOMENT_LABELS: Final = {
    SortColumn.RUN_AT: "Due",
    SortColumn.LOCKED_UNTIL: "Lease until",
    SortColumn.UPDATED_AT: "Finished",
}
# How each order reads, above the table.
ORDER_NOTES: Final = {
    Status.PENDING: "In the order claims take them: by queue, priority, type, then due time",
    Status.PROCESSING: "Soonest lease end first",
    Status.WAITING: "Soonest due first: for most, the order they were submitted in",
}
FINISHED_NOTE: Final = "Most recently finished first"
_SIGNED_IN: Final = {DASHBOARD: True}
_SHOWN_ERROR = 160


@dataclass(frozen=True, slots=True)
class JobRow:
    id: str
    href: str
    type: str
    queue: str
    status: str
    attempts: str
    created: str
    moment: str
    error: str


def cut_error(error: str | None) -> str:
    """A job's last error as a row shows it: its first characters, "…" when cut."""
    error = error or ""
    return error if len(error) <= _SHOWN_ERROR else error[:_SHOWN_ERROR] + "…"


def job_row(job: Job) -> JobRow:
    moment: datetime | None = getattr(job, TRAITS[job.status].order.column.value)
    return JobRow(
        id=str(job.id),
        href=f"{JOBS_PATH}/{job.id}",
        type=job.type,
        queue=job.queue,
        status=job.status.value,
        attempts=f"{job.attempts}/{job.max_attempts}",
        created=shown_time(job.created_at),
        moment="" if moment is None else shown_time(moment),
        error=cut_error(job.last_error),
    )


def shown_time(moment: datetime) -> str:
    """A moment as the page shows every one: UTC, to the second."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


class JobsPageController(Controller):
    path = UI_PATH
    include_in_schema = False
    response_headers = PAGE_HEADERS
    cache_control = CacheControlHeader(no_store=True)

    @get("/jobs", name="ui-jobs", opt=_SIGNED_IN)
    async def jobs_page(
        self,
        request: Request[Any, Any, Any],
        jobs: NamedDependency[JobService],
        access: NamedDependency[DashboardAccess],
    ) -> Template:
        context, status_code = await listing(request, jobs)
        return page(request, access, "jobs.html", context, status_code)

    @get("/fragments/jobs", name="ui-jobs-fragment", opt=_SIGNED_IN)
    async def jobs_fragment(
        self, request: Request[Any, Any, Any], jobs: NamedDependency[JobService]
    ) -> Template:
        """The newest page's table and links alone, which the page asks for every few
        seconds; swapped in place of the old ones."""
        context, status_code = await listing(request, jobs)
        return Template(
            template_name="fragments/jobs.html",
            context={**context, "refreshed": True},
            status_code=status_code,
        )


async def listing(
    request: Request[Any, Any, Any], jobs: JobService
) -> tuple[dict[str, object], int]:
    """The context of the page (or its fragment) the request's query string asks for,
    and its status: 400 with the reason for a filter that cannot be read."""
    base: dict[str, object] = {
        "statuses": list(Status),
        "time_format": TIME_FORMAT,
        "jobs_path": JOBS_PATH,
        "refresh_seconds": REFRESH_SECONDS,
        "refreshed": False,
    }
    given = request.query_params.dict()
    limit = _shown_limit(given.get("limit", []))
    base["limit"] = limit
    base["page_sizes"] = sorted({*PAGE_SIZES, limit})
    try:
        view = parse_filters(given)
    except BadFilter as error:
        form = {name: values[-1] for name, values in given.items()}
        return {**base, **_empty(form), "problem": str(error)}, HTTP_400_BAD_REQUEST
    return {**base, **await _listed(view, jobs), "problem": None}, HTTP_200_OK


def _shown_limit(values: list[str]) -> int:
    """The page size the form shows as chosen: the one asked for when it is one, else the
    default (a bad one is refused with its reason)."""
    raw = values[-1] if values else ""
    if raw.isascii() and raw.isdigit() and 1 <= int(raw) <= MAX_LIST_LIMIT:
        return int(raw)
    return DEFAULT_LIST_LIMIT


def _empty(form: dict[str, str]) -> dict[str, object]:
    return {
        "form": form,
        "rows": [],
        "moment_label": "When",
        "order_note": None,
        "newer_href": None,
        "older_href": None,
        "newest_href": JOBS_PATH,
        "searched": None,
        "lookup": None,
        "bulk_href": None,
        "fragment_href": None,
    }


async def _listed(view: JobsView, jobs: JobService) -> dict[str, object]:
    if view.lookup is not None:
        found = await jobs.find_by_key(view.lookup)
        return {
            **_empty(dict(view.form)),
            "rows": [] if found is None else [job_row(found)],
            "moment_label": "Updated",
            "lookup": view.lookup.kind.value.replace("_", " "),
        }
    query = view.query
    assert query is not None
    listed = await jobs.list_jobs(query)
    if query.before is not None and listed.previous is None:
        # Nothing comes before the page asked for: it is the newest page, and shown as
        # that one (full, and refreshing itself).
        query = replace(query, before=None)
        view = replace(view, query=query)
        listed = await jobs.list_jobs(query)
    return {
        "form": dict(view.form),
        "rows": [job_row(job) for job in listed.jobs],
        "moment_label": MOMENT_LABELS[query.order.column],
        "order_note": ORDER_NOTES.get(query.status, FINISHED_NOTE),
        "newer_href": _href(view, before=listed.previous),
        "older_href": _href(view, after=listed.next),
        "newest_href": None if view.first_page else view.href(JOBS_PATH),
        "searched": searched_note(view, listed),
        "lookup": None,
        "bulk_href": view.bulk_href(BULK_PATH),
        "fragment_href": view.href(FRAGMENT_PATH) if view.first_page else None,
    }


def _href(view: JobsView, **position: Any) -> str | None:
    if all(value is None for value in position.values()):
        return None
    return view.href(JOBS_PATH, **position)


def searched_note(view: JobsView, listed: JobPage) -> dict[str, object] | None:
    """What the page says when a search's budget ended it: how many jobs it read, and
    where to carry on."""
    query = view.query
    if listed.searched is None or query is None:
        return None
    backward = query.before is not None
    status = query.status.value.replace("_", " ")
    of_type = "" if query.type is None else f" of type {query.type}"
    if backward:
        read = f"the {listed.searched} {status} jobs{of_type} before the next page"
        rest, href = "newer ones", _href(view, before=listed.previous)
    elif query.order.descending:
        read = f"the {listed.searched} most recent {status} jobs{of_type}"
        rest, href = "older ones", _href(view, after=listed.next)
    else:
        read = f"the first {listed.searched} {status} jobs{of_type} in this order"
        rest, href = "later ones", _href(view, after=listed.next)
    return {"read": read, "rest": rest, "href": href}
