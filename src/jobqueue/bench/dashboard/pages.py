"""Which dashboard URLs the bench requests: every signed-in GET route under `/ui` of the
app's route table, its path parameters filled from the data and its filters tried.

Nothing here names a page. A route is a dashboard page when its handler carries the
`DASHBOARD` option (behind the session; sign-in and the static assets are open, and not
pages of data); a parameter is filled by what its name, or the path segment before it,
says it is (`_KINDS`), or else by the values its declaration lists (a `Literal`, an
`Enum`, an `enum` in its schema). A path parameter nothing here can fill makes `targets`
raise, so that a new page the bench cannot request fails its test instead of being
skipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any, Literal, get_args, get_origin
from urllib.parse import quote, urlencode

from litestar import Litestar
from litestar.params import CookieParameter, HeaderParameter, PathParameter, QueryParameter
from litestar.routes import HTTPRoute

from jobqueue.domain.status import Status
from jobqueue.entrypoints.http.middleware import DASHBOARD

# What a handler's signature may hold that is no query parameter.
_RESERVED = frozenset(
    {"request", "state", "scope", "headers", "cookies", "query", "data", "body", "socket"}
)


@dataclass(frozen=True, slots=True)
class PageRoute:
    """A GET route of the dashboard, as the route table has it."""

    name: str
    path: str  # Litestar's form: `/ui/jobs/{id:uuid}`
    path_parameters: tuple[str, ...]
    query_parameters: tuple[str, ...]
    # The values a parameter (of the path or the query) declares it takes, by its name.
    choices: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Samples:
    """Values from the benchmark's table to fill parameters with."""

    queues: tuple[str, ...]  # the busiest first, the one with fewest jobs (paused) last
    types: tuple[str, ...]  # the busiest first
    jobs: Mapping[Status, str]  # a job id of each status
    unique_key: str
    idempotency_key: str
    processes: tuple[str, ...]  # ids of live worker processes
    error_text: str  # a word of some jobs' errors
    now: datetime = field(default_factory=datetime.now)
    # A workflow's id (`/ui/workflows/{id}`); empty: the table holds none.
    workflow: str = ""


@dataclass(frozen=True, slots=True)
class Target:
    """One URL to time, and the route it exercises."""

    route: str
    url: str
    # What the URL names when the route's name does not say: the status of its job.
    note: str = ""

    @property
    def label(self) -> str:
        return f"{self.route} ({self.note})" if self.note else self.route


class Unfillable(Exception):
    """Routes with a path parameter the bench cannot fill from its data."""


def dashboard_routes(app: Litestar) -> list[PageRoute]:
    """Every GET route of the app whose handler is a signed-in dashboard page."""
    found = []
    for route in app.routes:
        if not isinstance(route, HTTPRoute):
            continue
        for handler in route.route_handlers:
            if "GET" not in handler.http_methods or not handler.opt.get(DASHBOARD):
                continue
            query, choices = _parameters(handler, set(route.path_parameters))
            found.append(
                PageRoute(
                    name=handler.name or route.path,
                    path=route.path,
                    path_parameters=tuple(route.path_parameters),
                    query_parameters=query,
                    choices=choices,
                )
            )
    return sorted(found, key=lambda each: each.path)


def _parameters(
    handler: Any, in_path: set[str]
) -> tuple[tuple[str, ...], Mapping[str, tuple[str, ...]]]:
    """The handler's query parameters, and the values any parameter declares it takes,
    each by its name in the URL."""
    dependencies = set(handler.resolve_dependencies())
    query = []
    choices = {}
    for name, definition in handler.parsed_fn_signature.parameters.items():
        if name in _RESERVED or name in dependencies:
            continue
        kwarg = definition.kwarg_definition
        if isinstance(kwarg, HeaderParameter | CookieParameter):
            continue
        if getattr(kwarg, "header", None) or getattr(kwarg, "cookie", None):
            continue
        # Its name in the URL: `QueryParameter(name=…)`, `PathParameter(name=…)`, or the
        # older `Parameter(query=…)`.
        alias = kwarg.name if isinstance(kwarg, QueryParameter | PathParameter) else None
        url_name = alias or getattr(kwarg, "query", None) or name
        if not (isinstance(kwarg, PathParameter) or url_name in in_path):
            query.append(url_name)
        declared = _declared_values(definition)
        if declared:
            choices[url_name] = declared
    return tuple(query), choices


def _declared_values(definition: Any) -> tuple[str, ...]:
    """The values a parameter declares it takes: a `Literal`, an `Enum`, or an `enum` in
    its schema (as the API's parameters declare theirs for the OpenAPI document)."""
    extra = getattr(definition.kwarg_definition, "schema_extra", None) or {}
    if "enum" in extra:
        return tuple(str(value) for value in extra["enum"])
    annotation = definition.annotation
    for candidate in (annotation, *get_args(annotation)):
        if get_origin(candidate) is Literal:
            return tuple(str(value) for value in get_args(candidate))
        if isinstance(candidate, type) and issubclass(candidate, Enum):
            return tuple(str(member.value) for member in candidate)
    return ()


def _kind(name: str, before: str | None = None) -> str | None:
    """What a parameter named `name` (after the path segment `before`) holds, if known."""
    for word in (name, *(() if before is None else (before, before.removesuffix("s")))):
        word = word.lower()
        if word in _KINDS:
            return _KINDS[word]
        if word.endswith(("_after", "_since", "_from")):
            return "since"
        if word.endswith(("_before", "_until")):
            return "until"
    return None


_KINDS = {
    "queue": "queue",
    "type": "type",
    "job_type": "type",
    "type_name": "type",
    "queue_name": "queue",
    "job": "job",
    "job_id": "job",
    "status": "status",
    "unique_key": "unique_key",
    "idempotency_key": "idempotency_key",
    "error": "error",
    "q": "error",
    "worker": "process",
    "process": "process",
    "process_id": "process",
    "workflow": "workflow",
    "workflow_id": "workflow",
}
# The jobs browser's (`ui/job_filters.py` parses its query string itself): each status's
# first page, narrowed by what its index holds (a queue of pending jobs, a type of
# finished ones) and by what it does not (a rare queue among dead letters, an error's
# text among all completed jobs: a search, bounded by its budget), a time range, and
# each key's lookup.
JOBS_QUERIES = (
    "status=pending",
    "status=pending&queue={queue}",
    "status=pending&type={type}",
    "status=processing",
    "status=completed",
    "status=completed&type={type}",
    "status=completed&queue={rare_queue}",
    "status=failed&error={error_text}",
    "status=dead_letter",
    "status=dead_letter&queue={rare_queue}",
    "status=cancelled&finished_from={an_hour_ago}",
    "status=completed&error={error_text}&created_from={a_day_ago}",
    "idempotency_key={idempotency_key}",
    "unique_key={unique_key}",
)

# Query strings for the pages that need more than their declared filters tried one by one
# (a combination they require, which the route's code says): a page listed here is
# requested with each of these only: `{queue}` and `{type}` are the busiest ones,
# `{rare_queue}` one with few jobs (an index read in another order, filtered by queue,
# reads the most there). A page that needs one and is not listed answers its bare URL
# with a 400, and fails the bench.
QUERIES: Mapping[str, tuple[str, ...]] = {
    # The confirmation of a bulk action (`ui/bulk.py`): an operation and a status are
    # required, a status the operation may select (`domain.bulk.SELECTABLE`); then a
    # count bounded by the selection's limit. Cancelling the busiest queue's pending jobs
    # selects from its whole range of the due index.
    "ui-bulk": (
        "operation=retry&status=dead_letter&queue={queue}",
        "operation=retry&status=dead_letter&queue={rare_queue}",
        "operation=retry&status=failed&type={type}",
        "operation=retry&status=cancelled",
        "operation=discard&status=failed&queue={rare_queue}",
        "operation=cancel&status=pending&queue={queue}",
        "operation=cancel&status=processing",
    ),
    "ui-jobs": JOBS_QUERIES,
    "ui-jobs-fragment": JOBS_QUERIES,
}

# Generic names, whose meaning is the segment before them (`/queues/{name}`).
_GENERIC = frozenset({"name", "id", "key"})


def _values(kind: str, samples: Samples) -> list[str]:
    """The values a parameter of `kind` is tried with: every status, a job of every
    status, the busiest and a paused queue, …"""
    since = samples.now.astimezone().replace(microsecond=0)
    return {
        "queue": list(samples.queues[:2]),
        "type": list(samples.types[:1]),
        "job": [samples.jobs[status] for status in Status if status in samples.jobs],
        "status": [status.value for status in Status],
        "unique_key": [samples.unique_key],
        "idempotency_key": [samples.idempotency_key],
        "error": [samples.error_text],
        "process": list(samples.processes[:1]),
        "since": [(since.replace(hour=0, minute=0, second=0)).isoformat()],
        "until": [since.isoformat()],
        "workflow": [samples.workflow] if samples.workflow else [],
    }[kind]


def targets(routes: Sequence[PageRoute], samples: Samples) -> list[Target]:
    """The URLs to time: each route with every combination of its path parameters'
    values, unfiltered, then with each filter it takes alone, then each status with each
    other filter (a status and a queue: the listings' hardest shape). Raises `Unfillable`
    naming every route and parameter that cannot be filled."""
    found: list[Target] = []
    problems = []
    for route in routes:
        # Each path, and what its job is (a job of each status).
        paths = [(route.path, "")]
        for name in route.path_parameters:
            before = _segment_before(route.path, name)
            kind = _kind(name, before) if name in _GENERIC else _kind(name)
            values = _values(kind, samples) if kind else list(route.choices.get(name, ()))
            if not values:
                problems.append(f"{route.path} ({route.name}): path parameter {name!r}")
                continue
            paths = [
                (_filled(path, name, value), _noted(note, value, samples))
                for path, note in paths
                for value in values
            ]
        filters = [
            (name, _values(kind, samples) if kind else list(route.choices.get(name, ())))
            for name in route.query_parameters
            if (kind := _kind(name)) is not None or route.choices.get(name)
        ]
        listed = QUERIES.get(route.name)
        if listed is None:
            found += _variants(route.name, paths, filters)
            continue
        since = samples.now.astimezone(UTC).replace(microsecond=0, tzinfo=None)
        fill = {
            "queue": quote(samples.queues[0]),
            "rare_queue": quote(samples.queues[-1]),
            "type": quote(samples.types[0]),
            "error_text": quote(samples.error_text),
            "idempotency_key": quote(samples.idempotency_key),
            "unique_key": quote(samples.unique_key),
            "an_hour_ago": quote((since - timedelta(hours=1)).isoformat()),
            "a_day_ago": quote((since - timedelta(days=1)).isoformat()),
        }
        found += [
            Target(route.name, f"{path}?{query.format(**fill)}", note)
            for path, note in paths
            for query in listed
        ]
    if problems:
        raise Unfillable(
            "the dashboard bench cannot fill these parameters from its data (declare the "
            "values a parameter takes, as a Literal, an Enum or an enum in its schema, or "
            "teach jobqueue/bench/dashboard/pages.py's _KINDS what it holds): "
            + "; ".join(problems)
        )
    return found


def _noted(note: str, value: str, samples: Samples) -> str:
    """`note`, saying which status's job `value` is when it is one."""
    status = next((status for status, job in samples.jobs.items() if job == value), None)
    return note if status is None else ", ".join(filter(None, (note, status)))


def _variants(
    route: str, paths: list[tuple[str, str]], filters: list[tuple[str, list[str]]]
) -> list[Target]:
    found = []
    statuses = [(name, values) for name, values in filters if _kind(name) == "status"]
    for path, note in paths:
        found.append(Target(route, path, note))
        for name, values in filters:
            found += [Target(route, f"{path}?{urlencode({name: v})}", note) for v in values]
        for status_name, each_status in statuses[:1]:
            for name, values in filters:
                if name != status_name:
                    found += [
                        Target(
                            route, f"{path}?{urlencode({status_name: s, name: values[0]})}", note
                        )
                        for s in each_status
                    ]
    return found


def _segment_before(path: str, name: str) -> str | None:
    segments = path.strip("/").split("/")
    for index, segment in enumerate(segments):
        if segment.startswith("{") and segment[1:].split(":")[0].rstrip("}") == name:
            return segments[index - 1] if index else None
    return None


def _filled(path: str, name: str, value: str) -> str:
    segments = path.split("/")
    return "/".join(
        quote(value, safe="")
        if segment.startswith("{") and segment[1:].split(":")[0].rstrip("}") == name
        else segment
        for segment in segments
    )
