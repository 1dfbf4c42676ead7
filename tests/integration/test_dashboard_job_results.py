"""A job's result and progress on its dashboard page, over HTTP against real PostgreSQL:
a completed job's result as indented JSON, escaped, cut at its limit with a note saying
how much is shown and where the whole is; a running job's progress in the live part its
page refreshes, moving with each report the store keeps."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.outcome import Decision
from jobqueue.domain.progress import Progress
from jobqueue.entrypoints.http.ui.job_page import PAYLOAD_SHOWN_BYTES
from tests.fakes import TEST_TYPES
from tests.support.api import build_api
from tests.support.endings import record

LEASE = timedelta(minutes=5)
HOSTILE = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


@pytest.fixture
async def client(engine: AsyncEngine, database_url: str) -> AsyncIterator[AsyncTestClient[Any]]:
    async with AsyncTestClient(app=build_api(database_url).app) as client:
        yield client


async def _running(store: PostgresJobStore) -> Job:
    """A job claimed by this test, as a worker would hold it."""
    await store.submit(NewJob.build(type="sleep", payload={"duration": "1ms"}, max_attempts=1))
    [claimed] = await store.claim(1, LEASE, types=TEST_TYPES)
    return claimed


def _section(html: str, heading: str) -> str:
    """The part of `html` from the heading with id `heading` to the next heading."""
    found = re.search(rf'<h2 id="{heading}">.*?(?=<h2 |\Z)', html, re.DOTALL)
    assert found, f"no {heading} in the page"
    return found.group(0)


async def test_a_completed_job_shows_its_result_escaped(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    store = PostgresJobStore(engine)
    claimed = await _running(store)
    result = {"title": HOSTILE, "rows": [1, 2]}
    await record(store, claimed.lease, Decision.complete(json.dumps(result)))

    page = await client.get(f"/ui/jobs/{claimed.id}")

    assert page.status_code == 200
    shown = _section(page.text, "result-heading")
    # Indented, escaped, its keys in jsonb's order (shorter first), as the API gives them.
    assert (
        '<pre class="json result" tabindex="0"><code>{\n  &#34;rows&#34;: [\n    1,\n    2\n  ],'
        f"\n  &#34;title&#34;: &#34;{ESCAPED}&#34;\n}}</code></pre>"
    ) in shown
    assert HOSTILE not in page.text
    assert 'data-fact="result-cut"' not in page.text


async def test_a_completed_job_without_a_result_says_so(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    store = PostgresJobStore(engine)
    claimed = await _running(store)
    await record(store, claimed.lease, Decision.complete())

    page = await client.get(f"/ui/jobs/{claimed.id}")

    assert "None: its handler returned nothing." in _section(page.text, "result-heading")
    assert 'class="json result"' not in page.text


async def test_a_huge_result_is_cut_saying_how_much_is_shown_and_where_the_whole_is(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    store = PostgresJobStore(engine)
    claimed = await _running(store)
    # About 1 MiB of JSON, RESULT_MAX_BYTES's default: the most a worker keeps.
    rows = [f"row {index:05d} " + "x" * 1000 for index in range(1000)]
    await record(store, claimed.lease, Decision.complete(json.dumps({"rows": rows})))

    page = await client.get(f"/ui/jobs/{claimed.id}")

    shown = _section(page.text, "result-heading")
    note = re.search(r'data-fact="result-cut">(.*?)</p>', shown, re.DOTALL)
    assert note, shown[:500]
    # Both sizes are of the indented text (the record's own JSON is more compact).
    said = re.sub(r"\s+", " ", note.group(1))
    assert re.match(r"Only its first 64 KiB of \d+(\.\d)? KiB are shown: the whole is in", said)
    assert f'<a href="/jobs/{claimed.id}">GET /jobs/{claimed.id}</a>' in note.group(1)
    assert "row 00000" in shown
    assert "row 00999" not in shown
    # The page holds the shown part, not the megabyte (escaping's quotes make it grow).
    assert len(page.content) < 2 * PAYLOAD_SHOWN_BYTES


async def test_a_running_job_s_progress_is_in_its_live_part_and_moves(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    store = PostgresJobStore(engine)
    claimed = await _running(store)
    path = f"/ui/jobs/{claimed.id}/fragments/status"
    before = await client.get(path)
    assert 'id="progress-heading"' not in before.text, "no report yet: no progress part"

    first = Progress.build(0.4, message=f"reading {HOSTILE}")
    assert await store.record_progress([(claimed.lease, first)]) == {claimed.lease}
    fragment = await client.get(path)

    assert 'hx-trigger="every 2s"' in fragment.text, "the part refreshes itself"
    progress = _section(fragment.text, "progress-heading")
    assert '<progress id="progress-bar" max="1" value="0.4000"' in progress
    assert 'data-fact="progress-percent">40%<' in progress
    assert f'data-fact="progress-message">reading {ESCAPED}<' in progress
    assert 'data-fact="progress-counts"' not in progress
    assert re.search(r'data-fact="progress-written">written \d+ s ago, <time datetime=', progress)
    assert 'data-fact="progress-note"' not in progress, "the running attempt's own report"
    assert HOSTILE not in fragment.text

    await store.record_progress([(claimed.lease, Progress.build(done=7, total=8))])
    moved = _section((await client.get(path)).text, "progress-heading")

    assert 'value="0.8750"' in moved
    assert 'data-fact="progress-percent">87%<' in moved
    assert 'data-fact="progress-counts">7 of 8 done<' in moved
    page = await client.get(f"/ui/jobs/{claimed.id}")
    assert 'value="0.8750"' in page.text, "the page holds the same part"


async def test_a_report_without_a_fraction_draws_no_bar(
    client: AsyncTestClient[Any], engine: AsyncEngine
) -> None:
    store = PostgresJobStore(engine)
    claimed = await _running(store)
    await store.record_progress([(claimed.lease, Progress.build(done=1_234_567))])

    progress = _section(
        (await client.get(f"/ui/jobs/{claimed.id}/fragments/status")).text, "progress-heading"
    )

    assert "<progress" not in progress
    assert 'data-fact="progress-counts">1,234,567 done<' in progress
