"""Bulk actions by filter (`/ui/bulk`): retry, discard or cancel the jobs of one status,
narrowed by queue and type, after seeing how many that is.

`GET /ui/bulk?operation=…&status=…&queue=…&type=…` says what will be done to which jobs
and how many, counted from the status's index up to one past `MAX_SELECTED` and no
further (a count of every match could read millions of rows); its form, the selection in
hidden fields, is the confirmation. `POST /ui/bulk` does it, one bounded call
(`domain/bulk.py`), and says how many jobs it acted on. A filter the action cannot take
(a status it may not select, a parameter it does not know) is a 400 page saying which:
ignoring a filter would act on more jobs than the person chose.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, Protocol, TypeVar
from urllib.parse import urlencode

from litestar import Controller, Request, get, post
from litestar.datastructures import CacheControlHeader
from litestar.di import NamedDependency
from litestar.exceptions import ClientException
from litestar.response import Template
from litestar.status_codes import HTTP_200_OK

from jobqueue.domain.bulk import COUNT_BUDGET, SELECTABLE, Selection
from jobqueue.domain.status import Status
from jobqueue.domain.transitions import Operation
from jobqueue.entrypoints.http.middleware import DASHBOARD
from jobqueue.entrypoints.http.service import JobService
from jobqueue.entrypoints.http.ui.actions import ACTION, action_form
from jobqueue.entrypoints.http.ui.frame import PAGE_HEADERS, UI_PATH, DashboardAccess, page
from jobqueue.entrypoints.http.ui.overview import queue_href
from jobqueue.entrypoints.http.ui.session import CSRF_FIELD

BULK_PATH: Final = f"{UI_PATH}/bulk"

E = TypeVar("E", bound=StrEnum)

# With API_TOKENS, a session cookie opens the page, as every page of the dashboard.
_SIGNED_IN: Final = {DASHBOARD: True}


class BulkAction(StrEnum):
    RETRY = "retry"
    # Delete before retention would: selected as a retry is.
    DISCARD = "discard"
    CANCEL = "cancel"


# What each action's selection is made for (`Selection.operation`).
SELECTS_FOR: Final[Mapping[BulkAction, Operation]] = {
    BulkAction.RETRY: Operation.RETRY,
    BulkAction.DISCARD: Operation.RETRY,
    BulkAction.CANCEL: Operation.CANCEL,
}
# How a result reads: "12 jobs retried".
DONE: Final[Mapping[BulkAction, str]] = {
    BulkAction.RETRY: "retried",
    BulkAction.DISCARD: "discarded",
    BulkAction.CANCEL: "cancelled",
}
# The fields a selection is read from, in a query string or a form.
FIELDS: Final = ("operation", "status", "queue", "type")


def status_words(status: Status) -> str:
    """A status as a sentence says it: "dead-letter jobs"."""
    return status.value.replace("_", "-")


@dataclass(frozen=True, slots=True)
class Bulk:
    """An action and the jobs it takes."""

    action: BulkAction
    selection: Selection

    @property
    def fields(self) -> dict[str, str]:
        """The selection as a query string's or a form's fields."""
        given = {
            "operation": self.action.value,
            "status": self.selection.status.value,
            "queue": self.selection.queue,
            "type": self.selection.type,
        }
        return {name: value for name, value in given.items() if value is not None}

    @property
    def href(self) -> str:
        return f"{BULK_PATH}?{urlencode(self.fields)}"

    @property
    def back_href(self) -> str:
        """Where the person came from: the queue's page, or the overview."""
        queue = self.selection.queue
        return UI_PATH if queue is None else queue_href(queue)

    @property
    def status_words(self) -> str:
        return status_words(self.selection.status)

    @property
    def done(self) -> str:
        return DONE[self.action]

    @property
    def destructive(self) -> bool:
        """Whether it loses what no other action gives back: a discard deletes the jobs, a
        cancel stops running attempts (a retry starts them over). Its button says so."""
        return self.action is not BulkAction.RETRY


@dataclass(frozen=True, slots=True)
class Tally:
    """A selection's count among the jobs its count read (`bulk.COUNT_BUDGET` at most)."""

    counted: int
    limit: int
    # Whether every job the selection could match was read: else `counted` is a floor,
    # among the `COUNT_BUDGET` jobs the count read.
    complete: bool = True

    @property
    def read(self) -> int:
        """How many jobs an incomplete count read: its whole budget."""
        return COUNT_BUDGET

    @property
    def over(self) -> bool:
        """More match than one call acts on."""
        return self.counted > self.limit

    @property
    def acted_on(self) -> int:
        return min(self.counted, self.limit)


def parse(fields: Mapping[str, Sequence[str]], *, besides: Iterable[str] = ()) -> Bulk:
    """The action and selection `fields` name (each a field's values); raise `ValueError`
    saying what to change. Empty fields are absent (a form's blank inputs); fields other
    than `FIELDS` and `besides` are refused, never ignored."""
    unknown = sorted(set(fields) - set(FIELDS) - set(besides))
    if unknown:
        raise ValueError(
            f"bulk actions select by {', '.join(FIELDS[1:])} only; "
            f"remove {', '.join(unknown)} from the filter"
        )
    given: dict[str, str] = {}
    for name in FIELDS:
        values = [value for value in fields.get(name, ()) if value != ""]
        if len(values) > 1:
            raise ValueError(f"give {name} once, not {len(values)} times")
        if values:
            given[name] = values[0]
    action = _member(BulkAction, "operation", given.get("operation"))
    status = _member(Status, "status", given.get("status"))
    try:
        selection = Selection(
            status,
            queue=given.get("queue"),
            type=given.get("type"),
            operation=SELECTS_FOR[action],
        )
    except ValueError as error:
        raise ValueError(f"cannot {action} {status_words(status)} jobs: {error}") from None
    return Bulk(action, selection)


def _member(kind: type[E], name: str, value: str | None) -> E:
    choices = " or ".join(member.value for member in kind)
    if value is None:
        raise ValueError(f"{name} is required: {choices}")
    try:
        return kind(value)
    except ValueError:
        raise ValueError(f"{name} must be {choices}, got {value!r}") from None


@dataclass(frozen=True, slots=True)
class BulkLink:
    label: str
    href: str


def bulk_links(*, queue: str | None = None) -> dict[BulkAction, list[BulkLink]]:
    """Every action's links, one per status it may select, narrowed to `queue` when given."""
    links: dict[BulkAction, list[BulkLink]] = {}
    for action in BulkAction:
        links[action] = []
        for status in sorted(SELECTABLE[SELECTS_FOR[action]]):
            bulk = Bulk(action, Selection(status, queue=queue, operation=SELECTS_FOR[action]))
            label = f"{action.capitalize()} {status_words(status)} jobs"
            links[action].append(BulkLink(label, bulk.href))
    return links


class Acting(Protocol):
    async def __call__(self, selection: Selection) -> int: ...


def _acting(jobs: JobService, action: BulkAction) -> Acting:
    calls: Mapping[BulkAction, Acting] = {
        BulkAction.RETRY: jobs.retry_many,
        BulkAction.DISCARD: jobs.discard_many,
        BulkAction.CANCEL: jobs.cancel_many,
    }
    return calls[action]


def _parsed(fields: Mapping[str, Sequence[str]], *, besides: Iterable[str] = ()) -> Bulk:
    try:
        return parse(fields, besides=besides)
    except ValueError as error:
        raise ClientException(detail=str(error)) from None


class BulkController(Controller):
    path = BULK_PATH
    include_in_schema = False
    response_headers = PAGE_HEADERS
    cache_control = CacheControlHeader(no_store=True)

    @get("/", name="ui-bulk", opt=_SIGNED_IN)
    async def confirm(
        self,
        request: Request[Any, Any, Any],
        jobs: NamedDependency[JobService],
        access: NamedDependency[DashboardAccess],
    ) -> Template:
        """What the action will do, to how many jobs, and the form that confirms it."""
        query = request.query_params
        bulk = _parsed({name: query.getall(name) for name in query})
        count = await jobs.count_selected(bulk.selection)
        tally = Tally(count.matched, bulk.selection.limit, count.complete)
        return page(request, access, "bulk.html", {"bulk": bulk, "tally": tally})

    @post("/", name="ui-bulk-act", opt=ACTION, status_code=HTTP_200_OK)
    async def act(
        self,
        request: Request[Any, Any, Any],
        jobs: NamedDependency[JobService],
        access: NamedDependency[DashboardAccess],
    ) -> Template:
        form = await action_form(request, access)
        bulk = _parsed({name: form.getall(name) for name in form}, besides=(CSRF_FIELD,))
        acted = await _acting(jobs, bulk.action)(bulk.selection)
        context = {"bulk": bulk, "acted": acted, "maybe_more": acted == bulk.selection.limit}
        return page(request, access, "bulk_done.html", context)
