"""The jobs browser (/ui/jobs) in a real headless Chromium on a real `jobqueue serve`: a
person filters through the form, pages forward and back, sees a new job appear on the
newest page by itself (keeping focus and scroll) while a later page stays as it was
read, and a bad filter is a 400 page saying why. No console error and no request
elsewhere (the `page` fixture checks after every test)."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx
import pytest
from selenium.webdriver.support.select import Select

from tests.support.browser import Page, browser, dashboard_service, page
from tests.support.processes import Service

pytestmark = pytest.mark.slow

# Fixtures of tests.support.browser, used by name.
__all__ = ["browser", "dashboard_service", "page"]


def _cancelled(service: Service, queue: str) -> str:
    """A job submitted to `queue` (no process consumes it) and cancelled: the newest
    cancelled job. Its id."""
    body = {"type": "sleep", "payload": {"duration": "1ms"}, "queue": queue}
    submitted = httpx.post(f"{service.base_url}/jobs", json=body, timeout=10)
    assert submitted.status_code == 201, submitted.text
    job_id = str(submitted.json()["id"])
    answer = httpx.post(f"{service.base_url}/jobs/{job_id}/cancel", timeout=10)
    assert answer.status_code == 200, answer.text
    return job_id


def _listed(page: Page) -> list[str]:
    return list(
        page.driver.execute_script(
            "return [...document.querySelectorAll('#jobs tr[data-job]')].map(r => r.dataset.job)"
        )
    )


def _follow(page: Page, link: str) -> None:
    """Click the page link `link` (its id), and wait for the page it opens."""
    page.follow(page.find(f"#{link}"))


def test_filter_page_forward_and_back_and_see_new_jobs_on_the_newest_page(
    page: Page, dashboard_service: Service
) -> None:
    queue = "browse"
    ids = [_cancelled(dashboard_service, queue) for _ in range(5)]
    newest_first = ids[::-1]

    page.visit("/ui/jobs")
    assert page.driver.title == "Jobs · jobqueue"
    assert page.find('nav a[aria-current="page"]').text == "Jobs"
    Select(page.find("#f-status")).select_by_value("cancelled")
    Select(page.find("#f-limit")).select_by_value("10")
    page.find("#f-queue").send_keys(queue)
    page.find("#f-type").send_keys("sleep")
    page.follow(page.find(".filters button[type=submit]"))
    assert f"queue={queue}" in page.driver.current_url
    assert _listed(page) == newest_first

    # Two a page: the filters stay in the URL, the page size with them.
    shown = urlsplit(page.driver.current_url)
    page.visit(f"{shown.path}?{shown.query.replace('limit=10', 'limit=2')}")
    assert _listed(page) == newest_first[:2]
    page.screenshots("jobs")

    # The newest page refreshes itself: a new job appears at its top, with no reload,
    # the focused link keeps its focus and the table its sideways scroll.
    page.viewport(390, 844)
    page.driver.execute_script("window.stillHere = true")
    # The link of a job that stays on the page after the refresh.
    page.driver.execute_script(f"document.getElementById('job-{newest_first[0]}').focus()")
    page.driver.execute_script("document.querySelector('.scroll').scrollLeft = 150")
    scrolled = page.driver.execute_script("return document.querySelector('.scroll').scrollLeft")
    assert scrolled > 0, "the table is wider than a phone's screen"
    sixth = _cancelled(dashboard_service, queue)
    page.until(lambda: _listed(page) == [sixth, newest_first[0]], "the new job appeared")
    assert page.driver.execute_script("return window.stillHere === true"), "no reload"
    focused = page.driver.switch_to.active_element.get_attribute("id")
    assert focused == f"job-{newest_first[0]}", "the focus stayed on the same job's link"
    assert page.driver.execute_script("return document.querySelector('.scroll').scrollLeft") == (
        scrolled
    )
    page.viewport(1280, 800)

    # Older: the next two, in a page that does not refresh itself.
    _follow(page, "page-older")
    assert "after=" in page.driver.current_url
    assert _listed(page) == newest_first[1:3]
    assert page.driver.find_elements("css selector", "#jobs[hx-get]") == []
    seventh = _cancelled(dashboard_service, queue)
    assert _listed(page) == newest_first[1:3], "a later page stays as it was read"
    page.screenshots("jobs-older")

    # Newer, from there: the two just before it; and newer again, the newest page, with
    # what came since, refreshing itself again.
    _follow(page, "page-newer")
    assert _listed(page) == [sixth, newest_first[0]]
    _follow(page, "page-newer")
    assert _listed(page) == [seventh, sixth]
    assert page.driver.find_elements("css selector", "#jobs[hx-get]") != []


def test_a_bad_filter_shows_its_reason_on_the_page(page: Page) -> None:
    page.expect_console_error(r"status of 400")

    page.visit("/ui/jobs?status=failed&finished_from=yesterday")

    assert "is not a time" in page.text("#problem")
    assert page.find("#f-finished-from").get_attribute("value") == "yesterday"
    page.screenshots("jobs-bad-filter")
