"""The workers, periodic and job-type pages in a real headless Chromium on a real
`jobqueue serve`: each loads with no console error and no request elsewhere (the `page`
fixture checks), shows its user data as text, and a schedule's last slot leads to its
job's page. The workers page follows the processes by itself: a worker that starts
appears, one killed with SIGKILL disappears about a lease after its last heartbeat, and
a list of types the user unfolded stays open."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration import published_handlers, registry_handlers
from tests.integration.registry_handlers import HOSTILE, NIGHTLY
from tests.support.browser import Page, browser, page
from tests.support.processes import Service, free_port, serving, start

pytestmark = pytest.mark.slow

# Fixtures of tests.support.browser, used by name.
__all__ = ["browser", "page"]

# A short lease, so that a killed worker's heartbeat expires soon; the timeouts a lease
# must exceed shortened to allow it.
SHORT_LEASE = {"LEASE_DURATION": "3s", "DB_CLIENT_TIMEOUT": "1500ms", "STATEMENT_TIMEOUT": "1s"}


@pytest.fixture(scope="module")
def dashboard_service(
    database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    """`serve` with schedules and a type of every option (`registry_handlers`)."""
    with serving(
        ["serve", "--handlers", registry_handlers.MODULE],
        tmp_path_factory.mktemp("registry"),
        DATABASE_URL=database_url,
        QUEUES="default,ticks",
        **SHORT_LEASE,
    ) as running:
        yield running


# The workers table's row of a process, found by its pid (read in the page in one step,
# as a refresh may swap the table between two).
_ROW_OF_PID = (
    "const rows = [...document.querySelectorAll('#workers tbody tr')];"
    "const row = rows.find(r => r.querySelector('[data-column=pid]')?.innerText.trim()"
    "  === String(arguments[0]));"
)


def _worker_text(page: Page, pid: int) -> str:
    """The text of process `pid`'s row, or "" when the table has none."""
    found = page.driver.execute_script(
        _ROW_OF_PID + "return row === undefined ? '' : row.innerText;", pid
    )
    return str(found)


def _worker_row(page: Page, pid: int) -> str:
    """A CSS selector of process `pid`'s row (by its process id, stable across refreshes)."""
    key = page.driver.execute_script(_ROW_OF_PID + "return row.dataset.worker;", pid)
    return f'#workers tr[data-worker="{key}"]'


def _refreshed(page: Page) -> None:
    """Wait until htmx swapped in a new workers table: the old one is marked first."""
    page.driver.execute_script("document.getElementById('workers').dataset.seen = 'yes'")
    page.until(
        lambda: page.driver.execute_script(
            "return document.getElementById('workers')?.dataset.seen === undefined"
        ),
        "the table refreshed itself",
    )


def test_the_workers_page_follows_a_worker_from_its_start_to_its_kill(
    page: Page, dashboard_service: Service, database_url: str, tmp_path: Path
) -> None:
    serve_pid = dashboard_service.process.pid
    page.visit("/ui/workers")
    assert page.driver.title == "Workers · jobqueue"
    page.until(lambda: _worker_text(page, serve_pid), "serve shows as a live process")
    assert "ticks" in _worker_text(page, serve_pid)

    worker = start(
        ["worker", "--handlers", published_handlers.MODULE],
        free_port(),
        tmp_path / "worker",
        DATABASE_URL=database_url,
        QUEUES="billing",
        WORKERS="3",
        **SHORT_LEASE,
    )
    try:
        pid = worker.process.pid
        shown = page.until(lambda: _worker_text(page, pid), "the new worker appeared by itself")
        assert "billing" in shown
        assert "0 / 3" in shown, "none running of its 3 (WORKERS)"
        assert "ago" in shown
        page.screenshots("workers")

        # serve runs more types than are listed: unfolded, they stay open across refreshes.
        summary = f"{_worker_row(page, serve_pid)} details summary"
        page.find(summary).click()
        _refreshed(page)
        assert page.driver.execute_script(
            "return document.querySelector(arguments[0]).parentElement.open", summary
        ), "the unfolded types stayed open"
        assert "refund" in _worker_text(page, serve_pid)

        worker.send(signal.SIGKILL)
        worker.wait()
        # Its heartbeat expires a lease (3 s) after the last one; the page refreshes every 5 s.
        page.until(lambda: not _worker_text(page, pid), "the killed worker disappeared", within=30)
        assert _worker_text(page, serve_pid), "serve is still listed"
        assert (
            page.driver.execute_script("return performance.getEntriesByType('navigation').length")
            == 1
        ), "without a reload"
    finally:
        worker.stop()


def test_the_periodic_page_shows_the_schedules_and_links_the_last_slots_job(
    page: Page, dashboard_service: Service
) -> None:
    # serve schedules `every-second` as it starts; its slots are inserted a little ahead.
    page.until(
        lambda: httpx.get(f"{dashboard_service.base_url}/periodic", timeout=10).json()["periodic"][
            0
        ]["last_slot_at"],
        "serve scheduled a slot",
    )
    page.visit("/ui/periodic")

    assert page.driver.title == "Periodic · jobqueue"
    tick = '#periodic tr[data-periodic="every-second"]'
    assert page.text(f'{tick} [data-column="queue"]') == "ticks"
    href = page.find(f'{tick} [data-column="last"] a').get_attribute("href")
    assert href is not None
    job_id = href.rsplit("/", 1)[1]
    assert href == f"{dashboard_service.base_url}/ui/jobs/{job_id}"
    job = httpx.get(f"{dashboard_service.base_url}/jobs/{job_id}", timeout=10).json()
    assert job["type"] == "every-second"
    # A name that is markup shows as text.
    rows = page.driver.find_elements("css selector", "#periodic tbody th")
    assert NIGHTLY in [row.text for row in rows]
    page.screenshots("periodic")

    page.follow(page.find(f'{tick} [data-column="last"] a'))
    assert page.driver.title == f"Job {job_id} · jobqueue"


def _published(service: Service, name: str) -> bool:
    types = httpx.get(f"{service.base_url}/types", timeout=10).json()["types"]
    return any(each["name"] == name and each["published_by"] for each in types)


def test_the_types_page_shows_each_types_options_and_schema_as_text(
    page: Page, dashboard_service: Service
) -> None:
    # serve publishes its types as it starts, and its API reads them soon after.
    page.until(lambda: _published(dashboard_service, "refund"), "serve published its types")
    page.visit("/ui/types")

    assert page.driver.title == "Job types · jobqueue"
    refund = 'section[data-type="refund"]'
    assert page.text(f'{refund} [data-field="description"]') == f"Refund one order {HOSTILE}."
    assert page.text(f'{refund} [data-field="timeout"]') == "30s"
    assert f"The order {HOSTILE}" in page.text(f'{refund} [data-field="schema"] pre')
    assert page.text(f'{refund} [data-field="published"]').startswith("by ")
    page.screenshots("types")
