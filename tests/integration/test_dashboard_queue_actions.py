"""The dashboard's queue page, its pause and resume forms and its bulk actions by filter,
over HTTP against a real PostgreSQL: what each page says, what each form changes, and
that a form without its CSRF token, or any form under DASHBOARD_READ_ONLY, is refused
with nothing changed."""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any
from uuid import uuid4

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.processes import PostgresProcesses
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.bulk import MAX_SELECTED
from jobqueue.domain.job import NewJob
from jobqueue.domain.outcome import Decision
from jobqueue.domain.processes import ProcessInfo
from jobqueue.domain.status import Status
from jobqueue.entrypoints.config.settings import Settings
from jobqueue.entrypoints.http.ui.session import CSRF_COOKIE
from tests.fakes import TEST_TYPES
from tests.support.api import build_api
from tests.support.endings import record
from tests.support.job_rows import seed_many

LEASE = timedelta(minutes=5)


@pytest.fixture
async def client(engine: AsyncEngine, database_url: str) -> AsyncIterator[AsyncTestClient[Any]]:
    async with AsyncTestClient(app=build_api(database_url).app) as client:
        yield client


@pytest.fixture
async def read_only(engine: AsyncEngine, database_url: str) -> AsyncIterator[AsyncTestClient[Any]]:
    settings = Settings(dashboard_read_only=True)
    async with AsyncTestClient(app=build_api(database_url, settings=settings).app) as client:
        yield client


async def _dead_letters(engine: AsyncEngine, queue: str, count: int) -> list[str]:
    store = PostgresJobStore(engine)
    ids = []
    for _ in range(count):
        new = NewJob(type="sleep", max_attempts=1, payload={"duration": "1ms"}, queue=queue)
        job = (await store.submit(new)).job
        (claimed,) = await store.claim(1, LEASE, queue, types=TEST_TYPES)
        await record(store, claimed.lease, Decision.dead_letter("smtp down"))
        ids.append(str(job.id))
    return ids


def _text(page: str, element_id: str) -> str:
    """The text of the element with `element_id`, tags dropped, spaces collapsed."""
    found = re.search(rf'id="{element_id}"[^>]*>(.*?)</(p|span|h1)>', page, re.S)
    assert found is not None, f"no #{element_id} in the page"
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", found.group(1))).split())


def _message(page: str) -> str:
    found = re.search(r'<p class="message">(.*?)</p>', page, re.S)
    assert found is not None, "no message in the page"
    return html.unescape(found.group(1))


async def _csrf(client: AsyncTestClient[Any], path: str) -> str:
    """The CSRF token the page at `path` gives its forms (and sets as a cookie)."""
    page = await client.get(path)
    assert page.status_code == 200, page.text
    token = client.cookies.get(CSRF_COOKIE)
    assert token
    assert f'name="csrf" value="{token}"' in page.text
    return token


async def _paused(client: AsyncTestClient[Any], queue: str) -> bool:
    listed = (await client.get("/queues")).json()["queues"]
    return any(each["name"] == queue and each["paused"] for each in listed)


async def _statuses(client: AsyncTestClient[Any], ids: list[str]) -> list[str]:
    return [(await client.get(f"/jobs/{job_id}")).json()["status"] for job_id in ids]


async def test_a_queue_is_paused_and_resumed_by_its_forms(client: AsyncTestClient[Any]) -> None:
    token = await _csrf(client, "/ui/queues/mail")

    paused = await client.post(
        "/ui/queues/mail/pause",
        data={"csrf": token, "next": "/ui/queues/mail"},
        follow_redirects=False,
    )

    assert paused.status_code == 303
    assert paused.headers["location"] == "/ui/queues/mail"
    assert await _paused(client, "mail")
    page = (await client.get("/ui/queues/mail")).text
    assert _text(page, "state") == "paused"
    assert 'action="/ui/queues/mail/resume"' in page
    # The overview's row offers the opposite action, and comes back to the overview.
    overview = (await client.get("/ui/fragments/queues")).text
    assert 'action="/ui/queues/mail/resume"' in overview

    resumed = await client.post(
        "/ui/queues/mail/resume", data={"csrf": token, "next": "/ui"}, follow_redirects=False
    )

    assert (resumed.status_code, resumed.headers["location"]) == (303, "/ui")
    assert not await _paused(client, "mail")


async def test_a_form_goes_back_to_a_dashboard_page_only(client: AsyncTestClient[Any]) -> None:
    token = await _csrf(client, "/ui/queues/mail")

    answer = await client.post(
        "/ui/queues/mail/pause",
        data={"csrf": token, "next": "https://elsewhere.example/"},
        follow_redirects=False,
    )

    assert (answer.status_code, answer.headers["location"]) == (303, "/ui")


async def test_forms_without_their_csrf_token_are_refused_and_change_nothing(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    dead = await _dead_letters(engine, "mail", 2)
    token = await _csrf(client, "/ui/queues/mail")
    selection = {"operation": "retry", "status": "dead_letter", "queue": "mail"}

    for path, form in [
        ("/ui/queues/mail/pause", {"next": "/ui"}),
        ("/ui/queues/mail/pause", {"next": "/ui", "csrf": "not-the-token"}),
        ("/ui/bulk", selection),
        ("/ui/bulk", {**selection, "csrf": token[::-1]}),
    ]:
        answer = await client.post(path, data=form)
        assert answer.status_code == 403, (path, form)
        assert "nothing was changed" in _message(answer.text)

    assert not await _paused(client, "mail")
    assert await _statuses(client, dead) == ["dead_letter", "dead_letter"]


async def test_a_form_holding_a_file_is_a_400_and_changes_nothing(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    dead = await _dead_letters(engine, "mail", 1)
    token = await _csrf(client, "/ui/queues/mail")
    selection = {"operation": "retry", "status": "dead_letter", "queue": "mail"}

    for path, form, field in [
        ("/ui/queues/mail/pause", {}, "csrf"),
        ("/ui/queues/mail/pause", {"csrf": token}, "next"),
        ("/ui/bulk", {"csrf": token, **selection}, "type"),
    ]:
        files = {field: ("field.txt", b"text")}
        answer = await client.post(path, data=form, files=files, follow_redirects=False)
        assert answer.status_code == 400, (path, field)
        assert "text only" in _message(answer.text)

    assert not await _paused(client, "mail")
    assert await _statuses(client, dead) == ["dead_letter"]


async def test_without_a_session_a_form_is_sent_to_sign_in_and_changes_nothing(
    engine: AsyncEngine, database_url: str
) -> None:
    settings = Settings(api_tokens=frozenset({"operator-token"}))
    dead = await _dead_letters(engine, "mail", 1)
    async with AsyncTestClient(app=build_api(database_url, settings=settings).app) as client:
        client.cookies.set(CSRF_COOKIE, "token", path="/ui")
        for path in ("/ui/queues/mail/pause", "/ui/bulk"):
            form = {"csrf": "token", "operation": "retry", "status": "dead_letter"}
            answer = await client.post(path, data=form, follow_redirects=False)
            assert answer.status_code == 303, path
            assert answer.headers["location"].startswith("/ui/sign-in")
        headers = {"Authorization": "Bearer operator-token"}
        listed = (await client.get("/queues", headers=headers)).json()["queues"]
        assert not any(each["paused"] for each in listed)
        job = await client.get(f"/jobs/{dead[0]}", headers=headers)
        assert job.json()["status"] == "dead_letter"


async def test_read_only_hides_the_forms_and_refuses_them_changing_nothing(
    read_only: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    dead = await _dead_letters(engine, "mail", 1)
    queue_page = (await read_only.get("/ui/queues/mail")).text
    bulk_page = (await read_only.get("/ui/bulk?operation=retry&status=dead_letter")).text
    overview = (await read_only.get("/ui")).text
    for page in (queue_page, bulk_page, overview):
        assert 'method="post" action="/ui/queues' not in page
        assert 'action="/ui/bulk"' not in page
    assert _text(bulk_page, "count") == "1 job will be retried."
    token = read_only.cookies.get(CSRF_COOKIE)
    assert token

    for path, form in [
        ("/ui/queues/mail/pause", {"csrf": token, "next": "/ui"}),
        ("/ui/bulk", {"csrf": token, "operation": "retry", "status": "dead_letter"}),
    ]:
        answer = await read_only.post(path, data=form)
        assert answer.status_code == 403, path
        assert "read-only" in _message(answer.text)

    assert not await _paused(read_only, "mail")
    assert await _statuses(read_only, dead) == ["dead_letter"]


async def test_the_queue_page_shows_its_counts_and_links_by_status(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    await _dead_letters(engine, "mail", 2)
    store = PostgresJobStore(engine)
    await store.submit(NewJob(type="sleep", max_attempts=1, payload={}, queue="mail"))

    page = (await client.get("/ui/queues/mail")).text

    assert re.search(r'data-figure="dead_letter">2<', page)
    assert re.search(r'data-figure="pending">1<', page)
    assert re.search(r'data-figure="due">1<', page)
    assert 'href="/ui/jobs?status=dead_letter&amp;queue=mail"' in page
    assert 'href="/ui/bulk?operation=retry&amp;status=dead_letter&amp;queue=mail"' in page
    # The overview links the queue's name to it.
    assert 'href="/ui/queues/mail"' in (await client.get("/ui")).text


async def test_the_queue_page_lists_the_live_processes_that_consume_it(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    registry = PostgresProcesses(engine)
    async with engine.begin() as connection:
        await connection.execute(text("DELETE FROM processes"))
    for host, queues in [("mail-host", ("mail", "other")), ("other-host", ("other",))]:
        process = ProcessInfo(
            id=uuid4(),
            host=host,
            pid=4242,
            version="9.9",
            queues=queues,
            types=("sleep",),
            concurrency=4,
            running=1,
        )
        await registry.heartbeat(process, timedelta(minutes=1))

    page = (await client.get("/ui/queues/mail")).text
    unconsumed = (await client.get("/ui/queues/nobody")).text

    assert '<th scope="row">mail-host</th>' in page
    assert "other-host" not in page
    assert _text(unconsumed, "no-consumers") == "No live worker process consumes this queue."


async def test_a_queue_nothing_named_is_empty_and_a_name_no_queue_may_have_is_a_400(
    client: AsyncTestClient[Any],
) -> None:
    empty = await client.get("/ui/queues/never-used")
    assert empty.status_code == 200
    assert re.search(r'data-figure="pending">0<', empty.text)
    assert _text(empty.text, "state") == "running"

    hostile = await client.get("/ui/queues/%3Cscript%3Ealert(1)")
    assert hostile.status_code == 400
    assert "<script>alert" not in hostile.text
    assert "queue name must be" in _message(hostile.text)


async def test_a_bulk_retry_counts_its_jobs_then_retries_them(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    mail = await _dead_letters(engine, "mail", 3)
    other = await _dead_letters(engine, "other", 1)

    page = (await client.get("/ui/bulk?operation=retry&status=dead_letter&queue=mail")).text

    assert _text(page, "count") == "3 jobs will be retried."
    assert _text(page, "selection") == "The dead-letter jobs in queue mail, of any type."
    assert "Retry 3 jobs</button>" in page
    token = client.cookies.get(CSRF_COOKIE)
    assert token
    done = await client.post(
        "/ui/bulk",
        data={"csrf": token, "operation": "retry", "status": "dead_letter", "queue": "mail"},
    )
    assert done.status_code == 200, done.text
    assert _text(done.text, "result") == "3 jobs retried."
    assert await _statuses(client, mail) == ["pending"] * 3
    assert await _statuses(client, other) == ["dead_letter"]

    again = (await client.get("/ui/bulk?operation=retry&status=dead_letter&queue=mail")).text
    assert _text(again, "count") == "No job matches: there is nothing to retry."
    assert 'action="/ui/bulk"' not in again


async def test_a_bulk_discard_and_cancel_act_on_their_statuses(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    dead = await _dead_letters(engine, "mail", 2)
    pending = (
        await PostgresJobStore(engine).submit(
            NewJob(type="sleep", max_attempts=1, payload={}, queue="mail", delay=timedelta(hours=1))
        )
    ).job
    token = await _csrf(client, "/ui/bulk?operation=discard&status=dead_letter&queue=mail")

    discarded = await client.post(
        "/ui/bulk",
        data={"csrf": token, "operation": "discard", "status": "dead_letter", "queue": "mail"},
    )
    cancelled = await client.post(
        "/ui/bulk",
        data={"csrf": token, "operation": "cancel", "status": "pending", "queue": "mail"},
    )

    assert _text(discarded.text, "result") == "2 jobs discarded."
    assert [(await client.get(f"/jobs/{job_id}")).status_code for job_id in dead] == [404, 404]
    assert _text(cancelled.text, "result") == "1 job cancelled."
    assert await _statuses(client, [str(pending.id)]) == ["cancelled"]


async def test_over_the_limit_the_count_says_how_many_one_call_takes(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    await seed_many(engine, MAX_SELECTED, Status.DEAD_LETTER)
    path = "/ui/bulk?operation=retry&status=dead_letter"

    at_the_limit = (await client.get(path)).text
    await seed_many(engine, 1, Status.DEAD_LETTER)
    over = (await client.get(path)).text

    assert _text(at_the_limit, "count") == f"{MAX_SELECTED} jobs will be retried."
    assert _text(over, "count") == (
        f"More than {MAX_SELECTED} jobs match. {MAX_SELECTED} will be retried now; "
        "run it again for the rest."
    )
    assert f"Retry {MAX_SELECTED} jobs</button>" in over


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("", "operation is required: retry or discard or cancel"),
        ("operation=purge&status=failed", "operation must be retry or discard or cancel"),
        ("operation=retry", "status is required"),
        ("operation=retry&status=done", "status must be waiting or pending or processing"),
        (
            "operation=retry&status=completed",
            "cannot retry completed jobs: status must be cancelled or dead_letter or failed",
        ),
        (
            "operation=cancel&status=dead_letter",
            "cannot cancel dead-letter jobs: status must be pending or processing",
        ),
        ("operation=retry&status=failed&queue=no%20spaces", "queue name must be"),
        (
            "operation=retry&status=failed&error=smtp",
            "bulk actions select by status, queue, type only; remove error from the filter",
        ),
        ("operation=retry&status=failed&queue=a&queue=b", "give queue once, not 2 times"),
    ],
)
async def test_a_bulk_action_it_cannot_take_is_a_400_page_saying_why(
    client: AsyncTestClient[Any], query: str, message: str
) -> None:
    answer = await client.get(f"/ui/bulk?{query}")

    assert answer.status_code == 400
    assert answer.headers["content-type"].startswith("text/html")
    assert message in _message(answer.text)
