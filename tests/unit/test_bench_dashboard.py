"""`jobqueue bench dashboard` without a database: the pages it finds in a route table, the
URLs it fills them into (and a parameter it cannot fill, refused), its options, and what
fails a run."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pytest
from litestar import Controller, Litestar, get
from litestar.params import PathParameter, QueryParameter

from jobqueue.bench.dashboard.dataset import Dataset
from jobqueue.bench.dashboard.pages import (
    Samples,
    Target,
    Unfillable,
    dashboard_routes,
    targets,
)
from jobqueue.bench.dashboard.report import markdown, problems
from jobqueue.bench.dashboard.run import Result, route_table
from jobqueue.bench.dashboard.timing import Timed
from jobqueue.bench.results import Latency
from jobqueue.domain.status import Status
from jobqueue.entrypoints.cli import main as cli
from jobqueue.entrypoints.http.middleware import DASHBOARD, PUBLIC

SIGNED_IN = {DASHBOARD: True}
SAMPLES = Samples(
    queues=("busy", "paused"),
    types=("email.send", "report.build"),
    jobs={status: f"id-{status}" for status in Status},
    unique_key="uniq-1",
    idempotency_key="idem-1",
    processes=("process-1",),
    error_text="declined",
)


class Pages(Controller):
    path = "/ui"

    @get("/", name="home", opt=SIGNED_IN)
    async def home(self) -> str:
        return ""

    @get("/queues/{name:str}", name="queue", opt=SIGNED_IN)
    async def queue(self, name: Annotated[str, PathParameter()]) -> str:
        return name

    @get("/jobs", name="jobs", opt=SIGNED_IN)
    async def jobs(
        self,
        status: Annotated[str | None, QueryParameter()] = None,
        # Named in the URL otherwise than in the signature.
        job_queue: Annotated[str | None, QueryParameter(name="queue")] = None,
        sort: Annotated[str | None, QueryParameter()] = None,
    ) -> str:
        return ""

    @get("/jobs/{id:str}", name="job", opt=SIGNED_IN)
    async def job(self, job_id: Annotated[str, PathParameter(name="id")]) -> str:
        return job_id

    @get("/jobs/{id:str}/{action:str}", name="confirm", opt=SIGNED_IN)
    async def confirm(
        self,
        job_id: Annotated[str, PathParameter(name="id")],
        action: Annotated[Literal["retry", "cancel"], PathParameter()],
        order: Annotated[str | None, QueryParameter(schema_extra={"enum": ["new", "old"]})] = None,
    ) -> str:
        return action

    @get("/about", name="open", opt={PUBLIC: True})
    async def about(self) -> str:
        return ""


class Bulk(Controller):
    path = "/ui/bulk"

    @get("/", name="ui-bulk", opt=SIGNED_IN)
    async def confirm(self) -> str:
        return ""


class Mystery(Controller):
    path = "/ui"

    @get("/things/{thing:str}", name="thing", opt=SIGNED_IN)
    async def thing(self, thing: Annotated[str, PathParameter()]) -> str:
        return thing


def test_the_pages_are_the_signed_in_get_routes_under_ui() -> None:
    routes = dashboard_routes(Litestar([Pages]))

    assert [route.name for route in routes] == ["home", "jobs", "job", "confirm", "queue"]
    jobs = next(route for route in routes if route.name == "jobs")
    # Query parameters by the name a URL gives them, an alias included.
    assert jobs.query_parameters == ("status", "queue", "sort")


def test_parameters_are_filled_by_what_their_names_say() -> None:
    app = Litestar([Pages])
    urls = [target.url for target in targets(dashboard_routes(app), SAMPLES)]

    # A job of every status; a generic `{name}` read by the segment before it.
    assert [url for url in urls if url.startswith("/ui/jobs/") and url.count("/") == 3] == [
        f"/ui/jobs/id-{status}" for status in Status
    ]
    # A job's URL says which status's job it names.
    notes = {target.url: target.label for target in targets(dashboard_routes(app), SAMPLES)}
    assert notes["/ui/jobs/id-dead_letter/cancel"] == "confirm (dead_letter)"
    assert notes["/ui/queues/busy"] == "queue"
    # Values a parameter declares (a Literal, an enum in its schema) are each tried.
    assert {
        "/ui/jobs/id-pending/retry",
        "/ui/jobs/id-dead_letter/cancel",
        "/ui/jobs/id-failed/retry?order=old",
    } <= set(urls)
    assert {"/ui/queues/busy", "/ui/queues/paused"} <= set(urls)
    # Every filter alone, then every status with each other filter; an unknown one
    # (`sort`) is left to its default.
    assert "/ui/jobs" in urls
    assert {f"/ui/jobs?status={status}" for status in Status} <= set(urls)
    assert "/ui/jobs?queue=busy" in urls
    assert {f"/ui/jobs?status={status}&queue=busy" for status in Status} <= set(urls)
    assert not [url for url in urls if "sort=" in url]


def test_a_page_listed_with_its_query_strings_is_requested_with_those_only() -> None:
    urls = [target.url for target in targets(dashboard_routes(Litestar([Bulk])), SAMPLES)]

    assert "/ui/bulk" not in urls
    assert "/ui/bulk?operation=retry&status=dead_letter&queue=busy" in urls
    assert "/ui/bulk?operation=retry&status=dead_letter&queue=paused" in urls
    assert "/ui/bulk?operation=retry&status=failed&type=email.send" in urls


def test_a_page_whose_parameter_cannot_be_filled_fails_by_name() -> None:
    with pytest.raises(Unfillable, match=r"/ui/things/\{thing:str\} \(thing\).*'thing'"):
        targets(dashboard_routes(Litestar([Pages, Mystery])), SAMPLES)


def test_the_service_route_table_has_the_overview_and_its_fragment_and_no_open_route() -> None:
    routes = {route.name: route for route in dashboard_routes(route_table())}

    assert {"ui-overview", "ui-queues-fragment"} <= set(routes)
    assert not any(name.startswith(("ui-sign-in", "ui-static")) for name in routes)


def _timed(url: str, statuses: tuple[int, ...], server_ms: list[float]) -> Timed:
    return Timed(
        Target("page", url),
        statuses,
        Latency.of([ms / 1000 for ms in server_ms]),
        Latency.of([ms / 1000 for ms in server_ms]),
    )


def test_a_run_fails_on_an_error_status_or_a_p95_over_budget() -> None:
    result = Result(
        Dataset(finished=10, pending=1),
        "embedded",
        reused=False,
        table_size="1 MB",
        timed=[
            _timed("/ui/fast", (200, 200), [5.0, 6.0]),
            _timed("/ui/broken", (200, 500), [5.0, 6.0]),
            _timed("/ui/slow", (200, 200), [150.0, 160.0]),
        ],
        requests=2,
    )

    assert problems(result, budget_ms=100) == [
        "/ui/broken answered [200, 500]",
        "/ui/slow: server time p95 159.5 ms, over 100 ms",
    ]
    table = markdown(result, budget_ms=100)
    assert "| `/ui/slow` | page | 200 | 155.0 | 159.5 (over) | 160.0 | 159.5 |" in table


def test_jobqueue_bench_dashboard_help_shows_its_own_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["bench", "dashboard", "--help"])

    shown = capsys.readouterr().out
    assert exited.value.code == 0
    assert "usage: jobqueue bench dashboard" in shown
    for option in ("--finished", "--pending", "--requests", "--budget-ms", "--data-dir"):
        assert option in shown


def test_its_options_reach_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def run_dashboard(options: Any, database_url: str | None) -> int:
        seen.update(vars(options))
        return 0

    monkeypatch.setattr("jobqueue.bench.dashboard.command.run_dashboard", run_dashboard)
    monkeypatch.delenv("DATABASE_URL", raising=False)

    assert cli.main(["bench", "dashboard", "--finished", "10", "--requests", "3"]) == 0
    assert (seen["finished"], seen["pending"], seen["requests"]) == (10, 500_000, 3)
