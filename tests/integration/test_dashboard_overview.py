"""The dashboard's overview (/ui) in a real headless Chromium on a real `jobqueue serve`:
it loads with no console error and no request elsewhere (checked by the `page` fixture
after every test), shows each queue's counts and refreshes them by itself, flags a queue
nobody consumes, shows hostile text as text, and its navigation is reachable by keyboard.
"""

from __future__ import annotations

import httpx
import pytest
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.keys import Keys

from tests.support.browser import Page, browser, dashboard_service, page
from tests.support.processes import Service

pytestmark = pytest.mark.slow

# Fixtures of tests.support.browser, used by name.
__all__ = ["browser", "dashboard_service", "page"]


def _submit(service: Service, queue: str, **options: object) -> None:
    body = {"type": "sleep", "payload": {"duration": "1ms"}, "queue": queue, **options}
    answer = httpx.post(f"{service.base_url}/jobs", json=body, timeout=10)
    assert answer.status_code == 201, answer.text


def _cell(queue: str, column: str) -> str:
    return f'tr[data-queue="{queue}"] [data-column="{column}"]'


def _shows(page: Page, queue: str, column: str, expected: str) -> None:
    """Wait until the table's `column` of `queue` reads `expected`. Not at once: on a
    busy machine a count takes longer than `queue_counts.INLINE_BELOW`, the page shows
    the last counts, and its table's next refresh the new ones (a CI run's page had no
    row yet for a queue whose job was just submitted)."""
    page.until(
        lambda: page.text(_cell(queue, column)) == expected,
        f"the {queue} row's {column} read {expected}",
    )


def test_the_overview_shows_each_queues_counts_with_links_to_its_jobs(
    page: Page, dashboard_service: Service
) -> None:
    _submit(dashboard_service, "overview-counts")
    _submit(dashboard_service, "overview-counts")
    _submit(dashboard_service, "overview-counts", delay="1h")

    page.visit("/ui")

    assert page.driver.title == "Overview · jobqueue"
    _shows(page, "overview-counts", "pending", "3")
    assert page.text(_cell("overview-counts", "due")) == "2"
    assert page.text(_cell("overview-counts", "scheduled")) == "1"
    link = page.find(f"{_cell('overview-counts', 'pending')} a").get_attribute("href")
    assert link == f"{dashboard_service.base_url}/ui/jobs?status=pending&queue=overview-counts"
    listed = httpx.get(link, timeout=10).text
    assert listed.count("data-job=") == 3, "the link lists the queue's jobs"
    assert page.text("footer").startswith("jobqueue ")
    page.screenshots("overview")


def test_the_table_refreshes_itself_and_keeps_the_users_place(
    page: Page, dashboard_service: Service
) -> None:
    _submit(dashboard_service, "overview-live")
    page.visit("/ui")
    page.viewport(390, 844)
    _shows(page, "overview-live", "pending", "1")
    # On a phone the table scrolls sideways in its box: where the user scrolled to stays.
    page.driver.execute_script("document.querySelector('.scroll').scrollLeft = 120")
    scrolled = page.driver.execute_script("return document.querySelector('.scroll').scrollLeft")
    assert scrolled > 0, "the table is wider than a phone's screen"

    _submit(dashboard_service, "overview-live")

    page.until(
        lambda: page.text(_cell("overview-live", "pending")) == "2",
        "the table showed the new job without a reload",
    )
    assert page.driver.execute_script("return performance.getEntriesByType('navigation').length")
    assert (
        page.driver.execute_script("return document.querySelector('.scroll').scrollLeft")
        == scrolled
    )


def test_a_queue_nobody_consumes_is_flagged(page: Page, dashboard_service: Service) -> None:
    _submit(dashboard_service, "overview-orphan")
    _submit(dashboard_service, "default", delay="1h")

    page.visit("/ui")

    _shows(page, "overview-orphan", "consumers", "0")
    assert "unconsumed" in page.text(_cell("overview-orphan", "state"))
    page.until(lambda: page.text(_cell("default", "consumers")) == "1", "serve consumes default")
    assert "unconsumed" not in page.text(_cell("default", "state"))


def test_hostile_text_in_a_dashboard_page_shows_as_text(page: Page) -> None:
    page.expect_console_error(r"status of 404")

    page.visit("/ui/%3Cscript%3Ealert(1)%3C%2Fscript%3E")

    assert "<script>alert(1)</script>" in page.text(".message")
    with pytest.raises(NoAlertPresentException):
        page.driver.switch_to.alert  # noqa: B018 (raises when there is no alert)
    assert page.text("h1") == "404 · Not Found"
    page.screenshots("error-404")


def test_the_navigation_is_reachable_with_the_keyboard(page: Page) -> None:
    page.visit("/ui")
    links = [
        element.get_attribute("href")
        for element in page.driver.find_elements("css selector", "nav a")
    ]
    assert links, "the page has a navigation bar"

    reached = []
    for _ in range(len(links) + 3):
        ActionChains(page.driver).send_keys(Keys.TAB).perform()
        focused = page.driver.switch_to.active_element
        reached.append(focused.get_attribute("href"))
        if focused.get_attribute("href") in links:
            outline = focused.value_of_css_property("outline-style")
            assert outline not in ("", "none"), "the focused link shows its focus"

    assert set(links) <= set(reached)
