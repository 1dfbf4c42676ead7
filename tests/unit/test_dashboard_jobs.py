"""The jobs browser without a browser: its query string read into a bounded query (or a
clear refusal), its links carrying the filters on, and its page over the fake store:
400 with the reason for a bad filter, user data escaped, pages forward and back."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from urllib.parse import parse_qs, urlsplit
from uuid import uuid4

import pytest
from litestar.testing import TestClient

from jobqueue.domain.job import NewJob
from jobqueue.domain.listing import JobPage, KeyKind, ListPosition
from jobqueue.domain.status import Status
from jobqueue.entrypoints.config.settings import Settings
from jobqueue.entrypoints.http.listing import encode_cursor
from jobqueue.entrypoints.http.ui.job_filters import BadFilter, JobsView, parse_filters
from jobqueue.entrypoints.http.ui.jobs import BULK_PATH, JOBS_PATH, searched_note
from jobqueue.entrypoints.http.ui.pages import template_config
from tests.fakes import InMemoryJobStore
from tests.support.api import build_api

HOSTILE = "<script>alert(1)</script>"
A_POSITION = ListPosition(datetime(2030, 1, 1, tzinfo=UTC), uuid4())


def parsed(**parameters: str) -> JobsView:
    return parse_filters({name: [value] for name, value in parameters.items()})


def test_no_filter_lists_pending_jobs_and_blank_fields_are_no_filter() -> None:
    view = parsed(queue="", type=" ", error="")

    assert view.query is not None
    assert view.query.status is Status.PENDING
    assert (view.query.queue, view.query.type, view.query.search) == (None, None, None)
    assert view.first_page


def test_each_filter_narrows_the_index_where_it_holds_it_and_is_searched_elsewhere() -> None:
    pending = parsed(status="pending", queue="mail", type="email").query
    failed = parsed(status="failed", queue="mail", type="email").query
    dead = parsed(status="dead_letter", queue="mail", type="email").query

    assert pending is not None
    assert failed is not None
    assert dead is not None
    # Pending jobs' index leads with the queue; finished jobs' holds the type.
    assert (pending.queue, pending.search and pending.search.type) == ("mail", "email")
    assert (failed.type, failed.search and failed.search.queue) == ("email", "mail")
    assert dead.search is not None
    assert (dead.type, dead.queue, dead.search.type, dead.search.queue) == (
        None,
        None,
        "email",
        "mail",
    )


def test_times_are_utc_unless_an_offset_says_otherwise() -> None:
    query = parsed(
        status="completed",
        finished_from="2026-01-31 09:00",
        finished_until="2026-01-31T12:00:00+02:00",
        created_from="2026-01-30",
        error="Timeout",
    ).query

    assert query is not None
    assert query.finished_from == datetime(2026, 1, 31, 9, tzinfo=UTC)
    assert query.finished_until == datetime(2026, 1, 31, 12, tzinfo=timezone(timedelta(hours=2)))
    assert query.search is not None
    assert query.search.created_from == datetime(2026, 1, 30, tzinfo=UTC)
    assert query.search.error == "Timeout"


def test_a_key_looks_the_job_up_whatever_the_other_filters() -> None:
    view = parsed(status="failed", idempotency_key="order-7")

    assert view.query is None
    assert view.lookup is not None
    assert (view.lookup.kind, view.lookup.key) == (KeyKind.IDEMPOTENCY, "order-7")


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({"status": "bogus"}, "unknown status 'bogus'"),
        ({"finished_from": "2026-01-01"}, "pending jobs have not finished"),
        ({"status": "failed", "finished_from": "yesterday"}, "is not a time"),
        (
            {"status": "failed", "created_from": "2026-02-01", "created_until": "2026-01-01"},
            "empty",
        ),
        ({"after": "not-a-cursor"}, "cursor is malformed"),
        ({"status": "failed", "after": encode_cursor(Status.PENDING, A_POSITION)}, "status"),
        ({"after": encode_cursor(Status.PENDING, A_POSITION), "before": "x"}, "position"),
        ({"limit": "0"}, "limit must be"),
        ({"queue": "no spaces please"}, "queue"),
        ({"idempotency_key": "a", "unique_key": "b"}, "not both"),
        ({"error": "x" * 201}, "error text"),
    ],
)
def test_a_filter_that_cannot_be_read_says_what_to_change(
    parameters: dict[str, str], message: str
) -> None:
    with pytest.raises(BadFilter, match=message):
        parsed(**parameters)


def test_a_filter_given_twice_is_refused() -> None:
    with pytest.raises(BadFilter, match="once"):
        parse_filters({"status": ["failed", "pending"]})


def test_links_carry_the_filters_and_limit_on_with_the_page_position() -> None:
    view = parsed(status="failed", queue="mail", error="a&b", limit="5")

    link = urlsplit(view.href(JOBS_PATH, after=A_POSITION))

    assert link.path == JOBS_PATH
    parameters = {name: values[0] for name, values in parse_qs(link.query).items()}
    assert parameters == {
        "status": "failed",
        "queue": "mail",
        "error": "a&b",
        "limit": "5",
        "after": encode_cursor(Status.FAILED, A_POSITION),
    }
    again = parse_filters(parse_qs(link.query))
    assert again.query is not None
    assert again.query.after == A_POSITION


@pytest.mark.parametrize(
    ("status", "operation"),
    [("dead_letter", "retry"), ("failed", "retry"), ("pending", "cancel"), ("completed", None)],
)
def test_act_on_these_links_to_the_bulk_page_for_a_status_bulk_actions_take(
    status: str, operation: str | None
) -> None:
    href = parsed(status=status, queue="mail", type="email", limit="5").bulk_href(BULK_PATH)

    if operation is None:
        assert href is None
    else:
        assert href == f"{BULK_PATH}?operation={operation}&status={status}&queue=mail&type=email"


@pytest.mark.parametrize("narrowed", ["error", "created_from", "finished_until"])
def test_act_on_these_is_not_offered_when_a_filter_a_bulk_action_cannot_take_narrows(
    narrowed: str,
) -> None:
    view = parsed(status="dead_letter", queue="mail", **{narrowed: "2026-01-01"})

    assert view.bulk_href(BULK_PATH) is None


def _store_with(count: int, job_type: str = "email") -> InMemoryJobStore:
    store = InMemoryJobStore()

    async def fill() -> None:
        for n in range(count):
            await store.submit(NewJob.build(type=job_type, max_attempts=3, payload={"n": n}))

    asyncio.run(fill())
    return store


def _links(html: str) -> dict[str, str]:
    return {
        name: href.replace("&amp;", "&")
        for name, href in re.findall(r'id="page-(\w+)" href="([^"]*)"', html)
    }


def test_the_page_goes_forward_and_back_and_only_the_first_refreshes() -> None:
    with TestClient(build_api(store=_store_with(5)).app) as client:
        first = client.get("/ui/jobs?status=pending&limit=2")
        second = client.get(_links(first.text)["older"])
        back = client.get(_links(second.text)["newer"])

    assert first.status_code == second.status_code == back.status_code == 200
    assert first.text.count("data-job=") == second.text.count("data-job=") == 2
    assert 'hx-get="/ui/fragments/jobs?status=pending&amp;limit=2"' in first.text
    assert "hx-get" not in second.text.split("<main", 1)[1]
    assert set(_links(second.text)) == {"newest", "newer", "older"}
    # Back at the start: the newest page again, refreshing itself.
    assert re.findall(r'data-job="([^"]+)"', back.text) == re.findall(
        r'data-job="([^"]+)"', first.text
    )
    assert "hx-get" in back.text.split("<main", 1)[1]


def test_a_bad_filter_is_a_400_page_keeping_the_form_and_saying_why() -> None:
    with TestClient(build_api(store=InMemoryJobStore()).app) as client:
        answer = client.get("/ui/jobs", params={"status": "failed", "finished_from": HOSTILE})

    assert answer.status_code == 400
    assert 'id="problem"' in answer.text
    assert "is not a time" in answer.text
    assert HOSTILE not in answer.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in answer.text


def test_user_data_in_the_table_is_escaped() -> None:
    with TestClient(build_api(store=_store_with(1, job_type=HOSTILE)).app) as client:
        answer = client.get("/ui/jobs")

    assert answer.status_code == 200
    assert HOSTILE not in answer.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in answer.text


def test_act_on_these_is_hidden_when_read_only() -> None:
    settings = Settings(dashboard_read_only=True)
    with TestClient(build_api(store=InMemoryJobStore()).app) as open_client:
        acting = open_client.get("/ui/jobs?status=dead_letter")
    with TestClient(build_api(store=InMemoryJobStore(), settings=settings).app) as client:
        reading = client.get("/ui/jobs?status=dead_letter")

    assert "Act on these" in acting.text
    assert f'href="{BULK_PATH}?operation=retry&amp;status=dead_letter"' in acting.text
    assert "Act on these" not in reading.text


def test_a_job_found_by_its_key_is_the_one_row() -> None:
    store = InMemoryJobStore()

    async def fill() -> None:
        await store.submit(
            replace(NewJob.build(type="email", max_attempts=3), idempotency_key="k1")
        )
        await store.submit(NewJob.build(type="email", max_attempts=3))

    asyncio.run(fill())
    with TestClient(build_api(store=store).app) as client:
        found = client.get("/ui/jobs?idempotency_key=k1")
        missing = client.get("/ui/jobs?idempotency_key=k2")

    assert found.text.count("data-job=") == 1
    assert "No job holds this key" in missing.text


def test_a_search_cut_short_says_how_far_it_read_and_links_to_carry_on() -> None:
    view = parsed(status="failed", type="email", error="timeout")
    cut_short = JobPage((), next=A_POSITION, searched=10_000)

    said = searched_note(view, cut_short)

    assert said is not None
    assert said["read"] == "the 10000 most recent failed jobs of type email"
    assert said["rest"] == "older ones"
    carried_on = parse_filters(parse_qs(urlsplit(str(said["href"])).query))
    assert view.query is not None
    assert carried_on.query == replace(view.query, after=A_POSITION)
    assert searched_note(view, JobPage((), next=None)) is None
    html = (
        template_config("1.0")
        .engine_instance.get_template("fragments/jobs.html")
        .render(**_fragment_context(searched=said))
    )
    assert "Searched the 10000 most recent failed jobs of type email; older ones were not" in html
    assert 'id="search-on"' in html


def _fragment_context(**given: object) -> dict[str, object]:
    context: dict[str, object] = {
        "form": {},
        "rows": [],
        "refreshed": False,
        "lookup": None,
        "order_note": None,
        "fragment_href": None,
        "refresh_seconds": 5,
        "searched": None,
        "moment_label": "Finished",
        "problem": None,
        "newest_href": None,
        "newer_href": None,
        "older_href": None,
    }
    return {**context, **given}
