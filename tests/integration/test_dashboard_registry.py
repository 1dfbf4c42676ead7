"""The dashboard's workers, periodic and job-type pages on a real PostgreSQL: each shows
what its API route shows (the live processes, the schedules with their slots, the types
with their options and schemas), with user data as text, and says what to do when there
is nothing to show."""

from __future__ import annotations

import html
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.job_types import PostgresJobTypes
from jobqueue.adapters.postgres.processes import PostgresProcesses
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.job import NewJob
from jobqueue.domain.job_types import JobType
from jobqueue.domain.processes import ProcessInfo
from jobqueue.domain.type_options import TypeOptions
from tests.integration import registry_handlers
from tests.integration.registry_handlers import HOSTILE, NIGHTLY
from tests.support.api import build_api

TTL = timedelta(minutes=1)
ESCAPED = html.escape(HOSTILE, quote=True)


@pytest.fixture(autouse=True)
async def empty_registries(engine: AsyncEngine) -> None:
    """No process, slot or published type left by another test of this module."""
    async with engine.begin() as connection:
        await connection.execute(text("DELETE FROM processes"))
        await connection.execute(text("DELETE FROM periodic_slots"))
        await connection.execute(text("DELETE FROM job_types"))


@pytest.fixture
async def client(database_url: str) -> AsyncIterator[AsyncTestClient[Any]]:
    api = build_api(database_url, handlers=registry_handlers.registry, published_types=True)
    async with AsyncTestClient(app=api.app) as client:
        yield client


def _process(**changes: Any) -> ProcessInfo:
    process = ProcessInfo(
        id=uuid4(),
        host="host-a",
        pid=4242,
        version="1.2.3",
        queues=("default", "emails"),
        types=("sleep", "webhook"),
        concurrency=12,
        running=3,
    )
    return replace(process, **changes)


async def _page(client: AsyncTestClient[Any], path: str) -> str:
    answer = await client.get(path)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/html")
    return answer.text


async def test_the_workers_page_lists_each_live_process_with_user_data_as_text(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    registry = PostgresProcesses(engine)
    plain = _process(queue_concurrency=(10, 2))
    # A process of an earlier version says only its total.
    hostile = _process(host=HOSTILE, queues=(HOSTILE,), types=tuple(f"t{n}" for n in range(9)))
    gone = _process(host="gone-host")
    for process in (plain, hostile, gone):
        await registry.heartbeat(process, TTL)
    await registry.leave(gone.id)
    # As if it last beat a minute and a half ago.
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "UPDATE processes SET heartbeat_at = now() - interval '90 seconds' WHERE id = :id"
            ),
            {"id": plain.id},
        )

    page = await _page(client, "/ui/workers")

    assert "<script>" not in page
    assert ESCAPED in page
    assert "gone-host" not in page
    row = page.split(f'data-worker="{plain.id}"')[1].split("</tr>")[0]
    assert '<td class="num" data-column="pid">4242</td>' in row
    share = '<span class="muted" title="attempts of this queue it runs at once">×{}</span>'
    assert (
        f'<span class="tag">default {share.format(10)}</span>'
        f'<span class="tag">emails {share.format(2)}</span>'
    ) in row
    assert ">3 / 12<" in row
    assert '<span class="tag">sleep</span><span class="tag">webhook</span>' in row
    assert "1 min 30 s ago" in row
    # Many types fold behind their number, in an element kept open across refreshes.
    folded = page.split(f'data-worker="{hostile.id}"')[1].split("</tr>")[0]
    assert f'<details id="types-{hostile.id}" hx-preserve>' in folded
    assert "<summary>9 types</summary>" in folded
    assert f'<span class="tag">{ESCAPED}</span>' in folded
    # The page refreshes its table from the fragment, which is the same table.
    assert 'hx-get="/ui/fragments/workers"' in page
    fragment = await _page(client, "/ui/fragments/workers")
    assert fragment.lstrip().startswith('<table id="workers"')
    assert f'data-worker="{hostile.id}"' in fragment


async def test_the_workers_page_says_how_to_start_a_worker_when_none_is_alive(
    client: AsyncTestClient[Any],
) -> None:
    page = await _page(client, "/ui/workers")

    assert "No worker process is alive" in page
    assert "<code>jobqueue worker</code>" in page


async def test_the_periodic_page_shows_each_schedule_with_its_slots_and_last_job(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    store = PostgresJobStore(engine)
    slot = datetime(2026, 1, 1, 12, 0, 5, tzinfo=UTC)
    job = await store.insert_slot(
        "every-second", slot, NewJob.build(type="every-second", queue="ticks", max_attempts=3)
    )
    assert job is not None
    # A schedule only some other process loads, whose job retention deleted.
    elsewhere = datetime(2026, 1, 1, 6, 0, tzinfo=UTC)
    await store.insert_slot("elsewhere", elsewhere, NewJob.build(type="x", max_attempts=3))
    async with engine.begin() as connection:
        await connection.execute(text("DELETE FROM jobs WHERE type = 'x'"))

    page = await _page(client, "/ui/periodic")

    assert "<script>" not in page
    assert f'data-periodic="nightly {ESCAPED}"' in page
    tick = page.split('data-periodic="every-second"')[1].split("</tr>")[0]
    assert "<code>* * * * * *</code>" in tick
    assert '<td data-column="queue">ticks</td>' in tick
    assert f'<a href="/ui/jobs/{job.id}"><time datetime="2026-01-01T12:00:05+00:00">' in tick
    assert "2026-01-01 12:00:05.000 UTC" in tick
    assert "in 0 s" in tick or "in 1 s" in tick
    nightly = page.split(f'data-periodic="{html.escape(NIGHTLY)}"')[1].split("</tr>")[0]
    assert "Europe/Paris" in nightly
    assert "catch up" in nightly
    # The handler's queue: none given, the default.
    assert '<td data-column="queue">default</td>' in nightly
    assert "not yet" in nightly
    assert " 03:00:00.000 UTC" in nightly or " 02:00:00.000 UTC" in nightly
    other = page.split('data-periodic="elsewhere"')[1].split("</tr>")[0]
    assert "2026-01-01 06:00:00.000 UTC" in other
    assert "<a " not in other, "no link to a job that no longer exists"


async def test_the_periodic_page_says_how_to_declare_a_schedule_when_there_is_none(
    database_url: str,
) -> None:
    async with AsyncTestClient(app=build_api(database_url).app) as client:
        page = await _page(client, "/ui/periodic")

    assert "This service loads no periodic job" in page
    assert "@registry.periodic" in page


async def test_the_types_page_shows_options_schema_and_publication_as_text(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    published = JobType(
        name=f"published {HOSTILE}",
        payload_schema={"type": "object", "description": HOSTILE},
        options=TypeOptions(queue="reports", priority=7),
        description=f"Made elsewhere {HOSTILE}",
    )
    await PostgresJobTypes(engine).publish([published], by=f"worker {HOSTILE}")

    page = await _page(client, "/ui/types")

    assert "<script>" not in page
    refund = page.split('data-type="refund"')[1].split("</section>")[0]
    assert f"Refund one order {ESCAPED}" in refund
    assert '<dd data-field="queue">billing</dd>' in refund
    assert '<dd data-field="priority">2</dd>' in refund
    assert '<dd data-field="max_attempts">5</dd>' in refund
    assert '<dd data-field="timeout">30s</dd>' in refund
    assert "by <code>order</code>" in refund
    assert "among pending, processing; per 1h" in refund
    assert "not by a worker" in refund
    # The schema, pretty-printed and escaped: the field's description is markup.
    assert "&#34;cents&#34;: {\n" in refund
    assert f"The order {html.escape(HOSTILE)}" in refund
    other = page.split(f'data-type="published {ESCAPED}"')[1].split("</section>")[0]
    assert ">published</span></h2>" in other
    assert f"Made elsewhere {ESCAPED}" in other
    assert '<dd data-field="queue">reports</dd>' in other
    assert f"by <code>worker {ESCAPED}</code> at <time" in other
    assert '<dd data-field="max_attempts"><code title="The service\'s setting">MAX' in other
    # Every type the API accepts: the built-in ones too.
    assert 'data-type="sleep"' in page
