"""The jobs browser's query string (`/ui/jobs?…`) as the store's query, and back.

The filters live in the URL so that a view can be shared and reloaded: each is a query
parameter of the page's plain GET form (an empty field is no filter), and the pages'
links carry them on. Whatever the store's indexes hold (status, type, queue where
indexed, when a finished job finished, a key) narrows the index range read; the rest (an
error's text, when a job was created, the queue of completed jobs) is a bounded search
of that range (`domain.listing.Search`). A value that makes no sense is a `BadFilter`
saying what to change, shown on the page with a 400.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final
from urllib.parse import urlencode

from litestar.exceptions import ClientException

from jobqueue.domain.bulk import SELECTABLE
from jobqueue.domain.fields import MAX_TYPE_LENGTH, check_queue_name
from jobqueue.domain.listing import (
    DEFAULT_LIST_LIMIT,
    MAX_LIST_LIMIT,
    MAX_SEARCH_TEXT,
    JobQuery,
    KeyKind,
    KeyLookup,
    ListPosition,
    bounded_query,
)
from jobqueue.domain.status import Status
from jobqueue.entrypoints.http.listing import decode_cursor, encode_cursor

# The form's fields, in the URL as the form sends them; `after`, `before` and `limit` are
# the pages' own.
FILTERS: Final = (
    "status",
    "queue",
    "type",
    "idempotency_key",
    "unique_key",
    "created_from",
    "created_until",
    "finished_from",
    "finished_until",
    "error",
)
POSITIONS: Final = ("after", "before")
# Filters a bulk selection (`domain.bulk.Selection`) has no place for.
_NOT_SELECTABLE: Final = (
    "error",
    "created_from",
    "created_until",
    "finished_from",
    "finished_until",
)
DEFAULT_STATUS: Final = Status.PENDING
TIME_FORMAT: Final = "YYYY-MM-DD HH:MM"
_STATUSES = ", ".join(status.value for status in Status)


class BadFilter(ValueError):
    """A filter that cannot be read; its message says what to change."""


@dataclass(frozen=True, slots=True)
class JobsView:
    """What the page lists: a key's job (`lookup`), else a page of `query`; `form` the
    filters as they were typed (the form shows them again), `limit` as given."""

    form: Mapping[str, str]
    query: JobQuery | None = None
    lookup: KeyLookup | None = None
    limit: str | None = None

    @property
    def status(self) -> Status:
        return self.query.status if self.query is not None else DEFAULT_STATUS

    @property
    def first_page(self) -> bool:
        """The newest page (the start of the listing), which refreshes itself."""
        query = self.query
        return query is not None and query.after is None and query.before is None

    def href(self, path: str, **positions: ListPosition | None) -> str:
        """`path` with these filters, the limit, and a page position (`after` or
        `before`) if one is given."""
        parameters = {name: value for name, value in self.form.items() if value}
        if self.limit is not None:
            parameters["limit"] = self.limit
        for name, position in positions.items():
            if position is not None:
                parameters[name] = encode_cursor(self.status, position)
        return f"{path}?{urlencode(parameters)}" if parameters else path

    def bulk_href(self, path: str) -> str | None:
        """The bulk page for these jobs' status, queue and type, when a bulk action
        takes jobs of this status. None for a key's job, and when other filters narrow
        the listing: a bulk selection cannot carry them, and would act on more jobs than
        the page lists."""
        if self.query is None or any(self.form.get(name) for name in _NOT_SELECTABLE):
            return None
        for operation, statuses in SELECTABLE.items():
            if self.query.status in statuses:
                parameters = {"operation": operation.value, "status": self.query.status.value}
                for name in ("queue", "type"):
                    if self.form.get(name):
                        parameters[name] = self.form[name]
                return f"{path}?{urlencode(parameters)}"
        return None


def parse_filters(parameters: Mapping[str, Sequence[str]]) -> JobsView:
    """The view `parameters` (every value of every query parameter) ask for; a
    `BadFilter` for a value that cannot be read. Parameters the page does not know are
    ignored, as a page ignores them."""
    given = {name: _single(name, parameters.get(name, ())) for name in FILTERS}
    form = {name: value for name, value in given.items() if value is not None}
    limit = _single("limit", parameters.get("limit", ()))
    keys = [(kind, key) for kind in KeyKind if (key := given[kind.value]) is not None]
    if len(keys) > 1:
        raise BadFilter("look a job up by its idempotency key or by its unique key, not both")
    if keys:
        return JobsView(form, lookup=_lookup(*keys[0]), limit=limit)
    status = _status(given["status"])
    error = given["error"]
    if error is not None and (len(error) > MAX_SEARCH_TEXT or "\x00" in error):
        raise BadFilter(f"error text is 1 to {MAX_SEARCH_TEXT} characters")
    try:
        query = bounded_query(
            status,
            type=_type(given["type"]),
            queue=_queue(given["queue"]),
            limit=_limit(limit),
            after=_position(parameters, "after", status),
            before=_position(parameters, "before", status),
            finished_from=_time("finished_from", given["finished_from"]),
            finished_until=_time("finished_until", given["finished_until"]),
            error=error,
            created_from=_time("created_from", given["created_from"]),
            created_until=_time("created_until", given["created_until"]),
        )
    except ValueError as problem:
        raise BadFilter(str(problem)) from None
    return JobsView(form, query=query, limit=limit)


def _single(name: str, values: Sequence[str]) -> str | None:
    """The parameter's one value; an empty one (a field left blank) is none."""
    if len(values) > 1:
        raise BadFilter(f"{name} must be given once")
    value = values[0].strip() if values else ""
    return value or None


def _lookup(kind: KeyKind, key: str) -> KeyLookup:
    try:
        return KeyLookup(kind, key)
    except ValueError as error:
        raise BadFilter(str(error)) from None


def _status(raw: str | None) -> Status:
    if raw is None:
        return DEFAULT_STATUS
    try:
        return Status(raw)
    except ValueError:
        raise BadFilter(f"unknown status {_shown(raw)!r}: choose one of {_STATUSES}") from None


def _queue(raw: str | None) -> str | None:
    if raw is None:
        return None
    try:
        return check_queue_name(raw)
    except ValueError as error:
        raise BadFilter(str(error)) from None


def _type(raw: str | None) -> str | None:
    if raw is not None and (len(raw) > MAX_TYPE_LENGTH or "\x00" in raw):
        raise BadFilter(f"a type is 1 to {MAX_TYPE_LENGTH} characters")
    return raw


def _time(name: str, raw: str | None) -> datetime | None:
    """A moment as a person types it: ISO 8601, a space or a T between date and time,
    seconds optional, UTC unless an offset says otherwise; a date alone is its midnight."""
    if raw is None:
        return None
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise BadFilter(
            f"{name.replace('_', ' ')} {_shown(raw)!r} is not a time: write {TIME_FORMAT}, "
            "in UTC unless an offset follows (+02:00)"
        ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _position(
    parameters: Mapping[str, Sequence[str]], name: str, status: Status
) -> ListPosition | None:
    raw = _single(name, parameters.get(name, ()))
    if raw is None:
        return None
    try:
        return decode_cursor(raw, status)
    except ClientException as error:
        raise BadFilter(f"the page's position ({name}) is not valid here: {error.detail}") from None


def _limit(raw: str | None) -> int:
    if raw is None:
        return DEFAULT_LIST_LIMIT
    if (
        not (raw.isascii() and raw.isdigit() and len(raw) <= 4)
        or not 1 <= int(raw) <= MAX_LIST_LIMIT
    ):
        raise BadFilter(f"limit must be a whole number from 1 to {MAX_LIST_LIMIT}")
    return int(raw)


def _shown(raw: str) -> str:
    return raw if len(raw) <= 64 else raw[:64] + "…"
