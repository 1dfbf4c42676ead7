"""A workflow's dashboard page and its actions over HTTP against real PostgreSQL: its jobs
in submission order with what each waits for, its counts and whether it ended, escaped;
"Cancel workflow" and "Retry failed steps" each a confirmation page, then a form that
acts and sends back to the workflow's page saying how many jobs it took; a form without
its CSRF token, a read-only dashboard, and an action with nothing left to act on each
change nothing and say why. A job's page links to its workflow and dependencies."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.dependencies import Step
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.outcome import Decision
from jobqueue.domain.status import Status
from jobqueue.entrypoints.config.settings import Settings
from tests.support.api import build_api
from tests.support.endings import record

LEASE = timedelta(minutes=5)
HOSTILE = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
ERROR = f"Traceback (most recent call last):\n  {HOSTILE}\nValueError: no"


@pytest.fixture
async def client(engine: AsyncEngine, database_url: str) -> AsyncIterator[AsyncTestClient[Any]]:
    async with AsyncTestClient(app=build_api(database_url).app) as client:
        yield client


@pytest.fixture
async def read_only(engine: AsyncEngine, database_url: str) -> AsyncIterator[AsyncTestClient[Any]]:
    settings = Settings(dashboard_read_only=True)
    async with AsyncTestClient(app=build_api(database_url, settings=settings).app) as client:
        yield client


@dataclass(frozen=True, slots=True)
class Workflow:
    id: UUID
    # In submission order: pending, waiting for `extract`, dead-lettered, cancelled (as
    # `flaky` did not complete), and a callback (of a hostile type) waiting for two.
    extract: Job
    transform: Job
    flaky: Job
    load: Job
    report: Job

    @property
    def jobs(self) -> list[Job]:
        return [self.extract, self.transform, self.flaky, self.load, self.report]


def _new(kind: str, **options: Any) -> NewJob:
    return NewJob.build(type=kind, max_attempts=1, **options)


async def _workflow(engine: AsyncEngine) -> Workflow:
    store = PostgresJobStore(engine)
    submitted = await store.submit_graph(
        [
            Step(_new("extract"), name="extract"),
            Step(_new("transform"), name="transform", after=("extract",)),
            Step(_new("flaky"), name="flaky"),
            Step(_new("load"), name="load", after=("flaky",)),
            Step(_new(HOSTILE, run_anyway=True), after=("transform", "load")),
        ]
    )
    [claimed] = await store.claim(1, LEASE, types=["flaky"])
    await record(store, claimed.lease, Decision.dead_letter(ERROR))
    jobs = [await store.get(each.job.id) for each in submitted]
    workflow_id = jobs[0].workflow_id
    assert workflow_id is not None
    return Workflow(workflow_id, *jobs)


async def _statuses(engine: AsyncEngine, workflow: Workflow) -> list[Status]:
    store = PostgresJobStore(engine)
    return [(await store.get(job.id)).status for job in workflow.jobs]


def _rows(html: str) -> list[str]:
    """Each row of the workflow's table, in order."""
    return re.findall(r"<tr data-job=.*?</tr>", html, re.DOTALL)


def _cell(row: str, column: str) -> str:
    found = re.search(rf'<td data-column="{column}"[^>]*>(.*?)</td>', row, re.DOTALL)
    assert found, f"no {column} in {row}"
    return found.group(1)


async def _csrf(client: AsyncTestClient[Any], path: str) -> str:
    """The CSRF token of the confirmation page at `path` (its cookie now in the client)."""
    confirmation = await client.get(path)
    assert confirmation.status_code == 200, confirmation.text
    found = re.search(r'name="csrf" value="([^"]+)"', confirmation.text)
    assert found, confirmation.text
    return found.group(1)


async def test_the_page_lists_the_jobs_in_submission_order_with_what_each_waits_for(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    workflow = await _workflow(engine)

    page = await client.get(f"/ui/workflows/{workflow.id}")

    assert page.status_code == 200
    assert page.headers["cache-control"] == "no-store"
    rows = _rows(page.text)
    assert [re.search(r'data-job="([^"]+)"', row).group(1) for row in rows] == [  # type: ignore[union-attr]
        str(job.id) for job in workflow.jobs
    ]
    for row, job in zip(rows, workflow.jobs, strict=True):
        assert f'href="/ui/jobs/{job.id}"' in row
        assert f'class="flag status-{job.status.value}"' in _cell(row, "status")
    extract, transform, flaky, load, report = rows
    assert _cell(extract, "type") == "extract"
    assert '<span class="hint">—</span>' in _cell(extract, "waits-for")
    # A dependency named by its step and type, linked to its page; what it waits for.
    waits = _cell(transform, "waits-for")
    assert f'<a href="/ui/jobs/{workflow.extract.id}"' in waits
    assert ">#1 extract</a>" in waits
    assert 'data-fact="waiting-for">waiting for 1<' in waits
    # Cancelled as its dependency did not complete: saying so, cut short.
    assert ">#3 flaky</a>" in _cell(load, "waits-for")
    assert "waiting for" not in _cell(load, "waits-for")
    assert str(workflow.flaky.id) in _cell(load, "error")
    # The callback: a hostile type and a dead letter's error show as text.
    assert _cell(report, "type") == ESCAPED
    assert ">#2 transform</a>" in _cell(report, "waits-for")
    assert ">#4 load</a>" in _cell(report, "waits-for")
    assert 'data-fact="run-anyway">runs anyway<' in _cell(report, "waits-for")
    assert 'data-fact="waiting-for">waiting for 1<' in _cell(report, "waits-for")
    assert _cell(flaky, "error").startswith(f"Traceback (most recent call last):\n  {ESCAPED}")
    assert '<time datetime="' in _cell(flaky, "started")
    assert '<time datetime="' in _cell(flaky, "finished")
    assert _cell(extract, "finished") == ""
    assert HOSTILE not in page.text
    # Counts at the top; not ended, so the part refreshes itself.
    counts = dict(re.findall(r'data-count="(\w+)">(\d+)<', page.text))
    assert counts == {
        "total": "5",
        "waiting": "2",
        "pending": "1",
        "dead_letter": "1",
        "cancelled": "1",
    }
    assert 'data-fact="state">in progress<' in page.text
    assert (
        f'hx-get="/ui/workflows/{workflow.id}/fragments/status" hx-trigger="every 5s"' in page.text
    )
    assert f'href="/ui/workflows/{workflow.id}/cancel"' in page.text
    assert f'href="/ui/workflows/{workflow.id}/retry"' in page.text


async def test_failed_steps_are_retried_after_the_confirmation(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    workflow = await _workflow(engine)
    path = f"/ui/workflows/{workflow.id}/retry"
    confirmation = await client.get(path)
    assert "It takes 2 jobs (1 dead letter, 1 cancelled) now." in confirmation.text
    assert confirmation.text.count("<title>Retry the failed steps of workflow ") == 1
    csrf = await _csrf(client, path)
    assert await _statuses(engine, workflow) == [
        Status.PENDING,
        Status.WAITING,
        Status.DEAD_LETTER,
        Status.CANCELLED,
        Status.WAITING,
    ], "confirming changes nothing"

    answer = await client.post(path, data={"csrf": csrf}, follow_redirects=False)

    assert answer.status_code == 303
    assert answer.headers["location"] == f"/ui/workflows/{workflow.id}?done=retried&count=2"
    # `flaky` is pending again, `load` waits for it again.
    assert await _statuses(engine, workflow) == [
        Status.PENDING,
        Status.WAITING,
        Status.PENDING,
        Status.WAITING,
        Status.WAITING,
    ]
    after = await client.get(answer.headers["location"])
    assert "Retried 2 jobs: each went back with a fresh budget of attempts." in after.text
    assert 'data-fact="waiting-for">waiting for 1<' in _cell(_rows(after.text)[3], "waits-for")
    assert f'href="/ui/workflows/{workflow.id}/retry"' not in after.text, "nothing to retry"


async def test_a_cancelled_workflow_ends_and_its_page_stops_refreshing(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    workflow = await _workflow(engine)
    path = f"/ui/workflows/{workflow.id}/cancel"
    confirmation = await client.get(path)
    assert "It takes 3 jobs (2 waiting, 1 pending) now." in confirmation.text
    csrf = await _csrf(client, path)

    answer = await client.post(path, data={"csrf": csrf}, follow_redirects=False)

    assert answer.headers["location"] == f"/ui/workflows/{workflow.id}?done=cancelled&count=3"
    assert set(await _statuses(engine, workflow)) == {Status.CANCELLED, Status.DEAD_LETTER}
    after = await client.get(answer.headers["location"])
    assert "Cancelled 3 jobs: those that had not ended will not run." in after.text
    assert 'data-fact="state">ended<' in after.text
    assert "5 of 5 jobs did not complete" in after.text
    assert "hx-trigger" not in after.text
    fragment = await client.get(f"/ui/workflows/{workflow.id}/fragments/status")
    assert fragment.status_code == 200
    assert fragment.text.lstrip().startswith('<div id="workflow-status"')
    assert "hx-trigger" not in fragment.text
    assert f'href="/ui/workflows/{workflow.id}/cancel"' not in after.text


async def test_an_action_with_nothing_left_to_act_on_says_why_and_changes_nothing(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    workflow = await _workflow(engine)
    csrf = await _csrf(client, f"/ui/workflows/{workflow.id}/cancel")
    # Meanwhile, someone else cancelled it.
    await PostgresJobStore(engine).cancel_workflow(workflow.id)

    answer = await client.post(
        f"/ui/workflows/{workflow.id}/cancel", data={"csrf": csrf}, follow_redirects=False
    )

    assert answer.status_code == 409
    assert answer.headers["content-type"].startswith("text/html")
    assert (
        "Nothing was changed: cannot cancel workflow: none of its jobs is waiting, pending or "
        "running." in answer.text
    )
    confirmation = await client.get(f"/ui/workflows/{workflow.id}/cancel")
    assert "Nothing to do: none of its jobs is waiting, pending or running." in confirmation.text
    assert '<form class="confirm"' not in confirmation.text


async def test_a_form_without_its_csrf_token_is_refused_and_changes_nothing(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    workflow = await _workflow(engine)
    csrf = await _csrf(client, f"/ui/workflows/{workflow.id}/retry")
    before = await _statuses(engine, workflow)

    for form in ({}, {"csrf": csrf[:-1]}):
        answer = await client.post(
            f"/ui/workflows/{workflow.id}/cancel", data=form, follow_redirects=False
        )

        assert answer.status_code == 403
        assert "nothing was changed" in answer.text
        assert await _statuses(engine, workflow) == before


async def test_a_read_only_dashboard_offers_no_action_and_refuses_one_posted(
    read_only: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    workflow = await _workflow(engine)
    page = await read_only.get(f"/ui/workflows/{workflow.id}")
    confirmation = await read_only.get(f"/ui/workflows/{workflow.id}/retry")
    assert f'href="/ui/workflows/{workflow.id}/retry"' not in page.text
    assert '<form class="confirm"' not in confirmation.text
    assert "read-only" in confirmation.text
    before = await _statuses(engine, workflow)

    answer = await read_only.post(
        f"/ui/workflows/{workflow.id}/retry", data={"csrf": "x"}, follow_redirects=False
    )

    assert answer.status_code == 403
    assert "DASHBOARD_READ_ONLY" in answer.text
    assert await _statuses(engine, workflow) == before


@pytest.mark.parametrize(
    "path",
    ["", "/fragments/status", "/cancel", "/retry"],
    ids=["page", "fragment", "cancel", "retry"],
)
async def test_an_unknown_workflow_is_a_404_page_and_a_malformed_id_a_400_page(
    client: AsyncTestClient[Any], engine: AsyncEngine, path: str
) -> None:
    unknown = await client.get(f"/ui/workflows/{UUID(int=0)}{path}")
    malformed = await client.get(f"/ui/workflows/not-a-uuid{path}")

    assert unknown.status_code == 404
    assert unknown.headers["content-type"].startswith("text/html")
    assert f"no workflow {UUID(int=0)}: no job of it is stored" in unknown.text
    assert malformed.status_code == 400
    assert malformed.headers["content-type"].startswith("text/html")
    assert "workflow id must be a UUID, got &#39;not-a-uuid&#39;" in malformed.text


async def test_actions_on_an_unknown_workflow_or_an_unknown_action_are_error_pages(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    workflow = await _workflow(engine)
    csrf = await _csrf(client, f"/ui/workflows/{workflow.id}/cancel")

    unknown = await client.post(f"/ui/workflows/{UUID(int=0)}/cancel", data={"csrf": csrf})
    malformed = await client.post("/ui/workflows/nope/retry", data={"csrf": csrf})
    no_action = await client.get(f"/ui/workflows/{workflow.id}/discard")

    assert unknown.status_code == 404
    assert malformed.status_code == 400
    assert no_action.status_code == 404
    assert no_action.headers["content-type"].startswith("text/html")
    assert await _statuses(engine, workflow) == [job.status for job in workflow.jobs]


async def test_a_job_s_page_links_to_its_workflow_and_dependencies(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    workflow = await _workflow(engine)

    transform = (await client.get(f"/ui/jobs/{workflow.transform.id}")).text
    report = (await client.get(f"/ui/jobs/{workflow.report.id}")).text
    flaky = (await client.get(f"/ui/jobs/{workflow.flaky.id}")).text

    assert f'<a href="/ui/workflows/{workflow.id}" title="{workflow.id}">' in transform
    assert f'<a href="/ui/jobs/{workflow.extract.id}"' in _fact(transform, "depends_on")
    assert _fact(transform, "waiting_for") == "1 of 1 jobs"
    assert "run_anyway" not in transform
    depends = _fact(report, "depends_on")
    assert f'href="/ui/jobs/{workflow.transform.id}"' in depends
    assert f'href="/ui/jobs/{workflow.load.id}"' in depends
    assert _fact(report, "run_anyway").startswith("yes")
    assert _fact(report, "waiting_for") == "1 of 2 jobs"
    # Ended: no longer waiting; no dependencies of its own.
    assert f'href="/ui/workflows/{workflow.id}"' in flaky
    assert 'data-fact="waiting_for"' not in flaky
    assert 'data-fact="depends_on"' not in flaky


async def test_a_job_outside_any_workflow_shows_none_of_it(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    submitted = await PostgresJobStore(engine).submit(_new("alone"))

    page = (await client.get(f"/ui/jobs/{submitted.job.id}")).text

    for fact in ("workflow", "depends_on", "run_anyway", "waiting_for"):
        assert f'data-fact="{fact}"' not in page


async def test_the_jobs_browser_lists_waiting_jobs(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    workflow = await _workflow(engine)

    browser = await client.get("/ui/jobs")
    waiting = await client.get("/ui/jobs?status=waiting")

    assert '<option value="waiting">waiting</option>' in browser.text
    assert waiting.status_code == 200
    assert '<option value="waiting" selected>waiting</option>' in waiting.text
    assert "Soonest due first" in waiting.text
    listed = re.findall(r'<tr data-job="([^"]+)"', waiting.text)
    assert listed == [str(workflow.transform.id), str(workflow.report.id)]


def _fact(html: str, name: str) -> str:
    found = re.search(rf'<dd data-fact="{name}">(.*?)</dd>', html, re.DOTALL)
    assert found, f"no fact {name}"
    return found.group(1).strip()
