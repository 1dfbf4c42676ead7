"""A job's dashboard page and its actions over HTTP against real PostgreSQL: each action
is a confirmation page, then a form that acts and sends back to the job's page saying
what it did; a form without its CSRF token, a read-only dashboard, and a status the
action cannot start from each change nothing and say why."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.outcome import Decision
from jobqueue.domain.status import Status
from jobqueue.entrypoints.config.settings import Settings
from tests.fakes import TEST_TYPES
from tests.support.api import build_api
from tests.support.endings import record

LEASE = timedelta(minutes=5)
ERROR = "Traceback (most recent call last):\n  <script>alert(1)</script>\nValueError: no"


@pytest.fixture
async def client(engine: AsyncEngine, database_url: str) -> AsyncIterator[AsyncTestClient[Any]]:
    async with AsyncTestClient(app=build_api(database_url).app) as client:
        yield client


@pytest.fixture
async def read_only(engine: AsyncEngine, database_url: str) -> AsyncIterator[AsyncTestClient[Any]]:
    settings = Settings(dashboard_read_only=True)
    async with AsyncTestClient(app=build_api(database_url, settings=settings).app) as client:
        yield client


async def _job(engine: AsyncEngine, ending: Decision | None = None) -> Job:
    """A job of its own type, ended with `ending` (None: left pending)."""
    store = PostgresJobStore(engine)
    submitted = await store.submit(
        NewJob.build(type="sleep", payload={"duration": "1ms"}, max_attempts=1)
    )
    if ending is None:
        return submitted.job
    [claimed] = await store.claim(1, LEASE, types=TEST_TYPES)
    return await record(store, claimed.lease, ending)


async def _status(engine: AsyncEngine, job_id: UUID) -> Status:
    return (await PostgresJobStore(engine).get(job_id)).status


async def _csrf(client: AsyncTestClient[Any], path: str) -> str:
    """The CSRF token of the confirmation page at `path` (its cookie now in the client)."""
    confirmation = await client.get(path)
    assert confirmation.status_code == 200, confirmation.text
    found = re.search(r'name="csrf" value="([^"]+)"', confirmation.text)
    assert found, confirmation.text
    return found.group(1)


async def test_a_dead_letter_is_retried_after_its_confirmation(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    job = await _job(engine, Decision.dead_letter(ERROR))
    page = await client.get(f"/ui/jobs/{job.id}")
    assert page.status_code == 200
    assert f'href="/ui/jobs/{job.id}/retry"' in page.text
    assert f'href="/ui/jobs/{job.id}/cancel"' not in page.text
    # The attempt's error, escaped, its lines kept.
    assert "  &lt;script&gt;alert(1)&lt;/script&gt;\nValueError: no" in page.text
    csrf = await _csrf(client, f"/ui/jobs/{job.id}/retry")
    assert await _status(engine, job.id) is Status.DEAD_LETTER, "confirming changes nothing"

    answer = await client.post(
        f"/ui/jobs/{job.id}/retry", data={"csrf": csrf}, follow_redirects=False
    )

    assert answer.status_code == 303
    assert answer.headers["location"] == f"/ui/jobs/{job.id}?done=retried"
    assert await _status(engine, job.id) is Status.PENDING
    after = await client.get(answer.headers["location"])
    assert "Retried: the job went back to pending" in after.text
    assert 'hx-trigger="every 2s"' in after.text, "a pending job's status refreshes itself"


async def test_a_pending_job_is_cancelled_and_a_cancelled_one_discarded(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    job = await _job(engine)
    csrf = await _csrf(client, f"/ui/jobs/{job.id}/cancel")

    cancelled = await client.post(
        f"/ui/jobs/{job.id}/cancel", data={"csrf": csrf}, follow_redirects=False
    )
    assert cancelled.headers["location"] == f"/ui/jobs/{job.id}?done=cancelled"
    assert await _status(engine, job.id) is Status.CANCELLED

    discarded = await client.post(
        f"/ui/jobs/{job.id}/discard", data={"csrf": csrf}, follow_redirects=False
    )
    assert discarded.headers["location"] == f"/ui/jobs/{job.id}?done=discarded"
    assert (await client.get(f"/jobs/{job.id}")).status_code == 404
    gone = await client.get(discarded.headers["location"])
    assert gone.status_code == 200
    assert "discarded" in gone.text
    assert (await client.get(f"/ui/jobs/{job.id}")).status_code == 404


async def test_a_form_without_its_csrf_token_is_refused_and_changes_nothing(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    job = await _job(engine, Decision.dead_letter("gave up"))
    csrf = await _csrf(client, f"/ui/jobs/{job.id}/retry")

    for form in ({}, {"csrf": csrf[:-1]}):
        answer = await client.post(f"/ui/jobs/{job.id}/discard", data=form, follow_redirects=False)

        assert answer.status_code == 403
        assert "nothing was changed" in answer.text
        assert await _status(engine, job.id) is Status.DEAD_LETTER


async def test_a_read_only_dashboard_offers_no_action_and_refuses_one_posted(
    read_only: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    job = await _job(engine, Decision.dead_letter("gave up"))
    page = await read_only.get(f"/ui/jobs/{job.id}")
    confirmation = await read_only.get(f"/ui/jobs/{job.id}/retry")
    assert f'href="/ui/jobs/{job.id}/retry"' not in page.text
    assert '<form class="confirm"' not in confirmation.text
    assert "read-only" in confirmation.text

    answer = await read_only.post(
        f"/ui/jobs/{job.id}/retry", data={"csrf": "x"}, follow_redirects=False
    )

    assert answer.status_code == 403
    assert "DASHBOARD_READ_ONLY" in answer.text
    assert await _status(engine, job.id) is Status.DEAD_LETTER


async def test_an_action_the_status_no_longer_allows_says_why_and_changes_nothing(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    job = await _job(engine)
    csrf = await _csrf(client, f"/ui/jobs/{job.id}/cancel")
    # Meanwhile, a worker ran it to the end.
    [claimed] = await PostgresJobStore(engine).claim(1, LEASE, types=TEST_TYPES)
    await record(PostgresJobStore(engine), claimed.lease, Decision.complete())

    answer = await client.post(
        f"/ui/jobs/{job.id}/cancel", data={"csrf": csrf}, follow_redirects=False
    )

    assert answer.status_code == 409
    assert answer.headers["content-type"].startswith("text/html")
    assert f"Nothing was changed: cannot cancel job {job.id}: it is completed" in answer.text
    assert await _status(engine, job.id) is Status.COMPLETED
    # The confirmation of an action the status does not allow offers no form.
    confirmation = await client.get(f"/ui/jobs/{job.id}/retry")
    assert "A completed job cannot be retried." in confirmation.text
    assert '<form class="confirm"' not in confirmation.text


async def test_a_finished_jobs_status_stops_refreshing(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    job = await _job(engine, Decision.complete())

    fragment = await client.get(f"/ui/jobs/{job.id}/fragments/status")

    assert fragment.status_code == 200
    assert 'data-fact="status">completed<' in fragment.text
    assert "hx-trigger" not in fragment.text


async def test_actions_on_a_malformed_or_unknown_id_are_error_pages(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    job = await _job(engine)
    csrf = await _csrf(client, f"/ui/jobs/{job.id}/cancel")

    malformed = await client.post(
        "/ui/jobs/not-a-uuid/cancel", data={"csrf": csrf}, follow_redirects=False
    )
    unknown = await client.post(
        "/ui/jobs/00000000-0000-0000-0000-000000000000/cancel", data={"csrf": csrf}
    )

    assert malformed.status_code == 400
    assert unknown.status_code == 404
    assert "job 00000000-0000-0000-0000-000000000000 not found" in unknown.text
    assert await _status(engine, job.id) is Status.PENDING
