"""A job's dashboard page in a real headless Chromium on a real `jobqueue serve`: through
the page alone a person retries a dead-lettered job and watches it run and complete
without reloading, and cancels a running job, which its worker then stops; a payload and
an error holding `<script>` show as text. The `page` fixture fails a test on any console
error or request elsewhere.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.common.exceptions import NoAlertPresentException
from sqlalchemy import text

from jobqueue.adapters.postgres.database import create_engine
from tests.integration.dashboard_job_handlers import MODULE
from tests.support.browser import Page, browser, page
from tests.support.processes import Service, serving, until

pytestmark = pytest.mark.slow

# Fixtures of tests.support.browser, used by name.
__all__ = ["browser", "page"]

HOSTILE = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def dashboard_service(
    database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    """`jobqueue serve` with this module's handler, consuming the `default` queue."""
    with serving(
        ["serve", "--handlers", MODULE],
        tmp_path_factory.mktemp("dashboard-job"),
        DATABASE_URL=database_url,
        QUEUES="default",
    ) as running:
        yield running


def _submit(service: Service, job_type: str, payload: dict[str, Any], **options: Any) -> str:
    body = {"type": job_type, "payload": payload, **options}
    answer = httpx.post(f"{service.base_url}/jobs", json=body, timeout=10)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def _record(service: Service, job_id: str) -> dict[str, Any]:
    answer = httpx.get(f"{service.base_url}/jobs/{job_id}", timeout=10)
    assert answer.status_code == 200, answer.text
    record: dict[str, Any] = answer.json()
    return record


def _row(database_url: str, job_id: str) -> dict[str, Any]:
    """The job's row as PostgreSQL holds it."""

    async def read() -> dict[str, Any]:
        engine = create_engine(database_url, pool_size=1)
        try:
            async with engine.connect() as connection:
                row = await connection.execute(
                    text(
                        "SELECT status, locked_until, attempt_log FROM jobs"
                        " WHERE id = CAST(:id AS uuid)"
                    ),
                    {"id": job_id},
                )
                return dict(row.mappings().one())
        finally:
            await engine.dispose()

    return asyncio.run(read())


def _act(page: Page, action: str) -> None:
    """Ask for `action` on the job's page, and confirm it on the page that asks."""
    page.follow(page.find(f"a.action-{action}"))
    assert page.driver.title.endswith("? · jobqueue"), "a confirmation page"
    page.follow(page.find(f"form.confirm button.action-{action}"))


def test_a_dead_letter_is_retried_through_the_page_and_seen_to_complete(
    page: Page, dashboard_service: Service, tmp_path: Path
) -> None:
    job_id = _submit(
        dashboard_service,
        "fails_once",
        {"directory": str(tmp_path), "note": HOSTILE},
        max_attempts=1,
    )
    until(lambda: _record(dashboard_service, job_id)["status"] == "dead_letter", "it dead-letters")

    page.visit(f"/ui/jobs/{job_id}")

    assert page.text('[data-fact="status"]') == "dead letter"
    assert f'"note": "{HOSTILE}"' in page.text("pre.payload")
    error = page.text('#attempts [data-column="error"]')
    assert error == f"Transient: the first attempt fails: {HOSTILE}\nand says so on two lines"
    with pytest.raises(NoAlertPresentException):
        page.driver.switch_to.alert  # noqa: B018 (raises when there is no alert)
    assert not page.driver.find_elements("css selector", "a.action-cancel")

    _act(page, "retry")

    assert page.driver.current_url.endswith(f"/ui/jobs/{job_id}?done=retried")
    assert page.text("p.done").startswith("Retried")
    page.driver.execute_script("window.jobPageLoaded = true")
    page.until(
        lambda: page.text('[data-fact="status"]') == "processing", "the page shows it running"
    )
    (tmp_path / "go").touch()
    page.until(
        lambda: page.text('[data-fact="status"]') == "completed", "the page shows it completed"
    )
    assert page.driver.execute_script("return window.jobPageLoaded === true"), "not reloaded"
    outcomes = [
        cell.text
        for cell in page.driver.find_elements("css selector", '#attempts [data-column="outcome"]')
    ]
    assert outcomes == ["dead letter", "completed"]
    page.screenshots("job")


def test_a_running_job_is_cancelled_through_the_page_and_its_worker_stops_it(
    page: Page, dashboard_service: Service, database_url: str
) -> None:
    job_id = _submit(dashboard_service, "sleep", {"duration": "10m"})
    until(lambda: _record(dashboard_service, job_id)["status"] == "processing", "it runs")

    page.visit(f"/ui/jobs/{job_id}")
    assert page.text('[data-fact="status"]') == "processing"
    assert [a.text for a in page.driver.find_elements("css selector", ".actions a")] == ["Cancel…"]
    page.follow(page.find("a.action-cancel"))
    page.screenshots("job-confirm")
    page.follow(page.find("form.confirm button.action-cancel"))

    assert page.text('[data-fact="status"]') == "cancelled"
    assert page.text("p.done").startswith("Cancelled")
    row = _row(database_url, job_id)
    assert row["status"] == "cancelled"
    assert row["locked_until"] is None, "its lease ended with the cancel"
    assert row["attempt_log"][-1]["outcome"] == "cancelled"
    until(
        lambda: [
            record
            for record in dashboard_service.log()
            if record.get("job_id") == job_id
            and record["message"] == "job finished: cancelled while it ran; its handler was stopped"
        ],
        "the worker stopped the attempt",
        within=30,
    )
    assert page.text('#attempts [data-column="outcome"]') == "cancelled"


def _bar(page: Page) -> str:
    """The progress bar's value as the page holds it now, "" without a bar; read in one
    step, since a refresh may swap the bar out between a find and a read."""
    value = page.driver.execute_script(
        "const bar = document.getElementById('progress-bar');"
        "return bar === null ? '' : String(bar.value);"
    )
    return str(value)


def test_a_running_job_s_progress_moves_and_its_result_comes_without_a_reload(
    page: Page, dashboard_service: Service, tmp_path: Path
) -> None:
    job_id = _submit(dashboard_service, "reports", {"directory": str(tmp_path), "note": HOSTILE})
    until(
        lambda: (_record(dashboard_service, job_id).get("progress") or {}).get("done") == 1,
        "its first report is written",
    )

    page.visit(f"/ui/jobs/{job_id}")

    assert page.text('[data-fact="status"]') == "processing"
    assert _bar(page) == "0.25"
    assert page.text('[data-fact="progress-percent"]') == "25%"
    assert page.text('[data-fact="progress-counts"]') == "1 of 4 done"
    assert page.text('[data-fact="progress-message"]') == f"reading {HOSTILE}"
    assert page.text('[data-fact="progress-written"]').startswith("written ")
    with pytest.raises(NoAlertPresentException):
        page.driver.switch_to.alert  # noqa: B018 (raises when there is no alert)
    page.screenshots("job-progress")
    _dark(page, "job-progress-dark")
    page.driver.execute_script("window.jobPageLoaded = true")

    (tmp_path / "step").touch()

    page.until(lambda: _bar(page) == "0.75", "the bar moved to the next report")
    assert page.text('[data-fact="progress-percent"]') == "75%"
    assert page.text('[data-fact="progress-message"]') == "writing"
    (tmp_path / "go").touch()
    page.until(
        lambda: page.text('[data-fact="status"]') == "completed", "the page shows it completed"
    )
    assert page.driver.execute_script("return window.jobPageLoaded === true"), "not reloaded"
    assert f'"note": "{HOSTILE}"' in page.text("pre.result")
    assert page.text('[data-fact="progress-note"]') == "The last report of its last attempt."

    # Opened afresh, as a person following a link to a finished job would.
    page.visit(f"/ui/jobs/{job_id}")
    assert '"pages": [\n    1,' in page.text("pre.result")
    assert page.text('[data-fact="progress-percent"]') == "75%"
    # The last report and the result, in sight together.
    scroll = "document.getElementById('progress-heading').scrollIntoView()"
    page.driver.execute_script(scroll)
    page.screenshots("job-result")
    page.driver.execute_script(scroll)
    _dark(page, "job-result-dark")


def _dark(page: Page, name: str) -> None:
    """Screenshots of the page as it is, in the dark scheme."""
    page.driver.execute_cdp_cmd(
        "Emulation.setEmulatedMedia",
        {"features": [{"name": "prefers-color-scheme", "value": "dark"}]},
    )
    try:
        page.screenshots(name)
    finally:
        page.driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
