"""The workers, periodic and job-type pages' rows without a database: ages on the store's
clock, many types folded, a schedule's queue as the scheduler resolves it, a last slot's
job linked while it exists, long schemas folded, and markup in any of it escaped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode
from uuid import uuid4

import pytest
from litestar.testing import TestClient

from jobqueue.domain.job_types import JobType, KnownType, PublishedType
from jobqueue.domain.periodic import LastSlot, PeriodicJob
from jobqueue.domain.processes import LiveProcess, ProcessInfo
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.type_options import TypeOptions
from jobqueue.entrypoints.config.settings import Settings
from jobqueue.entrypoints.http.ui.frame import SECURITY_POLICY
from jobqueue.entrypoints.http.ui.job_page import moment
from jobqueue.entrypoints.http.ui.pages import template_config
from jobqueue.entrypoints.http.ui.registry_rows import (
    SCHEMA_LINES_SHOWN,
    TYPES_SHOWN,
    periodic_rows,
    ran_elsewhere,
    type_cards,
    worker_rows,
)
from tests.fakes import InMemoryJobStore
from tests.support.api import build_api

HOSTILE = "<script>alert(1)</script>"
NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def _live(types: tuple[str, ...], **info: object) -> LiveProcess:
    process = ProcessInfo(
        id=uuid4(),
        host=str(info.get("host", "host-a")),
        pid=7,
        version="1.0",
        queues=("default",),
        types=types,
        concurrency=4,
        running=1,
    )
    return LiveProcess(
        process,
        started_at=NOW - timedelta(hours=1),
        heartbeat_at=NOW - timedelta(seconds=2),
        # The store's clock, not the reader's: the age is taken from it.
        read_at=NOW + timedelta(seconds=3),
    )


def test_a_worker_row_ages_its_heartbeat_on_the_stores_clock_and_folds_many_types() -> None:
    few = tuple(f"t{n}" for n in range(TYPES_SHOWN))
    many = (*few, "one-more")

    [shown, folded] = worker_rows([_live(few), _live(many)])

    assert shown.heartbeat_age == "5 s"
    assert shown.started == moment(NOW - timedelta(hours=1))
    assert shown.started is not None
    assert shown.started.text == "2026-12-04 11:00:00.000 UTC"
    assert (shown.folded, folded.folded) == (False, True)


def test_the_workers_table_escapes_what_it_shows() -> None:
    engine = template_config("1.0").engine_instance
    rows = worker_rows([_live((HOSTILE,) * (TYPES_SHOWN + 1), host=HOSTILE)])

    html = engine.get_template("fragments/workers.html").render(
        rows=rows, tracked=True, refresh_seconds=5
    )

    assert "<script>" not in html
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") == TYPES_SHOWN + 2


def test_a_schedule_shows_its_types_queue_and_links_its_last_slots_job() -> None:
    registry = Registry()

    @registry.handler("report", queue="reports")
    async def report(ctx: JobContext, payload: object) -> None:
        pass

    job_id = uuid4()
    slot = NOW + timedelta(minutes=3)
    scheduled = [
        (PeriodicJob("0 * * * *", "report", name="b-report"), slot),
        (PeriodicJob("0 * * * *", "elsewhere", name="a-elsewhere"), slot),
    ]
    last = {
        "b-report": LastSlot(NOW, job_id),
        "a-elsewhere": LastSlot(NOW, None),
        "retired": LastSlot(NOW - timedelta(days=1), job_id),
    }

    elsewhere, report_row = periodic_rows(scheduled, last, registry, NOW)

    assert (report_row.name, report_row.queue, report_row.next_in) == (
        "b-report",
        "reports",
        "3 min 0 s",
    )
    assert report_row.last_job_href == f"/ui/jobs/{job_id}"
    # A type without a handler here is scheduled with the defaults: the default queue.
    assert (elsewhere.queue, elsewhere.last_job_href) == ("default", None)
    [retired] = ran_elsewhere(last, {"b-report", "a-elsewhere"})
    assert (retired.name, retired.last_job_href) == ("retired", f"/ui/jobs/{job_id}")


def test_a_long_payload_schema_starts_folded_and_a_short_one_open() -> None:
    short = JobType("short", {"type": "object"})
    long = JobType("long", {f"p{n}": n for n in range(SCHEMA_LINES_SHOWN)})
    published = PublishedType(long, published_at=NOW, published_by="host:1")

    first, second = type_cards(
        [KnownType(short, local=True), KnownType(long, local=False, published=published)]
    )

    assert (first.schema, first.schema_folded, first.published_at) == (
        '{\n  "type": "object"\n}',
        False,
        None,
    )
    assert second.schema_folded
    assert second.published_at == moment(NOW)


def test_the_types_page_escapes_descriptions_and_schemas() -> None:
    engine = template_config("1.0").engine_instance
    hostile = JobType(
        HOSTILE,
        {"description": HOSTILE},
        TypeOptions(queue="q", max_attempts=2),
        description=HOSTILE,
    )

    html = engine.get_template("types.html").render(
        cards=type_cards([KnownType(hostile, local=True)]), csrf="x", signed_in=False
    )

    assert "<script>" not in html
    assert "&#34;description&#34;: &#34;&lt;script&gt;alert(1)&lt;/script&gt;&#34;" in html


def test_without_a_process_registry_the_workers_page_says_so() -> None:
    with TestClient(build_api(store=InMemoryJobStore()).app) as client:
        answer = client.get("/ui/workers")

    assert answer.status_code == 200
    assert "This service keeps no registry of worker processes" in answer.text


@pytest.mark.parametrize(
    "path", ["/ui/workers", "/ui/fragments/workers", "/ui/periodic", "/ui/types"]
)
def test_with_api_tokens_each_page_sends_to_sign_in(path: str) -> None:
    settings = Settings.from_env({"API_TOKENS": "secret"})
    with TestClient(build_api(store=InMemoryJobStore(), settings=settings).app) as client:
        refused = client.get(path, follow_redirects=False)
        allowed = client.get(path, headers={"Authorization": "Bearer secret"})

    assert refused.status_code == 303
    assert refused.headers["location"] == f"/ui/sign-in?{urlencode({'next': path})}"
    assert allowed.status_code == 200
    assert allowed.headers["content-security-policy"] == SECURITY_POLICY
