"""A queue's page, pausing and resuming, and bulk actions by filter, in a real headless
Chromium on a real `jobqueue serve`, through the pages alone: a person pauses and resumes
a queue (the API sees it paused, then running), retries a queue's dead-lettered jobs
after seeing how many (they become pending), and a form posted without its CSRF token is
refused with nothing changed.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from selenium.webdriver.common.keys import Keys
from sqlalchemy import text

from jobqueue.adapters.postgres.database import create_engine
from tests.support.browser import Page, browser, dashboard_service, page
from tests.support.processes import Service

pytestmark = pytest.mark.slow

# Fixtures of tests.support.browser, used by name.
__all__ = ["browser", "dashboard_service", "page"]


def _dead_letters(database_url: str, queue: str, count: int) -> None:
    """`count` dead-lettered jobs in `queue`, written straight into the table: the service
    consumes `default` only, so once retried they stay pending for the test to see."""

    async def seed() -> None:
        engine = create_engine(database_url, pool_size=1)
        try:
            async with engine.begin() as connection:
                await connection.execute(
                    text(
                        "INSERT INTO jobs (type, queue, status, attempts, max_attempts, run_at)"
                        " SELECT 'sleep', :queue, 'dead_letter', 1, 1, now()"
                        " FROM generate_series(1, :count)"
                    ),
                    {"queue": queue, "count": count},
                )
        finally:
            await engine.dispose()

    asyncio.run(seed())


def _submit(service: Service, queue: str) -> None:
    body = {"type": "sleep", "payload": {"duration": "1ms"}, "queue": queue, "delay": "1h"}
    answer = httpx.post(f"{service.base_url}/jobs", json=body, timeout=10)
    assert answer.status_code == 201, answer.text


def _paused(service: Service, queue: str) -> bool:
    listed = httpx.get(f"{service.base_url}/queues", timeout=10).json()["queues"]
    return any(each["name"] == queue and each["paused"] for each in listed)


def _jobs(service: Service, status: str, queue: str) -> int:
    query: dict[str, str | int] = {"status": status, "queue": queue, "limit": 100}
    answer = httpx.get(f"{service.base_url}/jobs", params=query, timeout=10)
    return len(answer.json()["jobs"])


def test_a_person_pauses_and_resumes_a_queue_from_the_overview(
    page: Page, dashboard_service: Service
) -> None:
    _submit(dashboard_service, "browser-pause")
    page.visit("/ui")
    state = 'tr[data-queue="browser-pause"] [data-column="state"]'
    assert page.text(state) == "running"
    # On a phone the buttons scroll with the table in its box: the page itself stays as
    # wide as the screen (else the phone's browser zooms the whole page out).
    page.viewport(390, 844)
    assert page.driver.execute_script("return document.documentElement.scrollWidth") <= 390
    page.viewport(1280, 800)

    page.follow(page.find("#pause-browser-pause"))

    page.until(lambda: page.text(state) == "paused", "the row shows the queue paused")
    assert page.driver.current_url == f"{dashboard_service.base_url}/ui"
    assert _paused(dashboard_service, "browser-pause")

    # With the keyboard this time: the button is a real one, and keeps the focus while
    # the table refreshes itself around it.
    page.driver.execute_script(
        "document.getElementById('pause-browser-pause').focus();"
        "document.getElementById('queues').dataset.before = 'refresh';"
    )
    page.until(
        lambda: page.driver.execute_script(
            "return document.getElementById('queues').dataset.before === undefined"
        ),
        "the table refreshed itself",
    )
    page.settled()
    focused = page.driver.switch_to.active_element
    assert focused.get_attribute("id") == "pause-browser-pause"
    assert focused.text.startswith("Resume")
    focused.send_keys(Keys.ENTER)
    page.settled()

    page.until(lambda: page.text(state) == "running", "the row shows the queue running")
    assert not _paused(dashboard_service, "browser-pause")


def test_a_person_retries_a_queues_dead_letters_after_seeing_how_many(
    page: Page, dashboard_service: Service, database_url: str
) -> None:
    _dead_letters(database_url, "browser-bulk", 3)
    page.visit("/ui")
    page.follow(page.find('tr[data-queue="browser-bulk"] th a'))

    assert page.driver.title == "Queue browser-bulk · jobqueue"
    assert page.text('[data-figure="dead_letter"]') == "3"
    page.screenshots("queue")
    page.follow(page.driver.find_element("link text", "Retry dead-letter jobs"))

    assert page.text("#count") == "3 jobs will be retried."
    assert page.text("#selection") == "The dead-letter jobs in queue browser-bulk, of any type."
    page.screenshots("bulk")
    page.follow(page.find("form.confirm button"))

    assert page.text("#result") == "3 jobs retried."
    assert _jobs(dashboard_service, "pending", "browser-bulk") == 3
    assert _jobs(dashboard_service, "dead_letter", "browser-bulk") == 0


def test_a_form_posted_without_its_csrf_token_is_refused(
    page: Page, dashboard_service: Service, database_url: str
) -> None:
    _dead_letters(database_url, "browser-csrf", 2)
    page.visit("/ui/bulk?operation=retry&status=dead_letter&queue=browser-csrf")
    assert page.text("#count") == "2 jobs will be retried."
    page.expect_console_error(r"403 \(Forbidden\)")

    page.driver.execute_script("document.querySelector('form.confirm [name=csrf]').remove()")
    page.follow(page.find("form.confirm button"))

    assert page.text("h1") == "403 · Forbidden"
    assert "nothing was changed" in page.text(".message")
    assert _jobs(dashboard_service, "dead_letter", "browser-csrf") == 2
    assert _jobs(dashboard_service, "pending", "browser-csrf") == 0


def _limits(service: Service, queue: str) -> dict[str, object]:
    listed = httpx.get(f"{service.base_url}/queues", timeout=10).json()["queues"]
    (found,) = [each["limits"] for each in listed if each["name"] == queue]
    return dict(found)


def test_a_person_limits_a_queue_from_its_page_and_sees_the_limits_in_use(
    page: Page, dashboard_service: Service
) -> None:
    _submit(dashboard_service, "browser-limits")
    page.visit("/ui/queues/browser-limits")
    assert page.text("#limits").startswith("None")

    page.find('form.limits [name="concurrency"]').send_keys("3")
    page.find('form.limits [name="rate"]').send_keys("100/1m")
    page.find('form.limits [name="key_concurrency"]').send_keys("2")
    page.find('form.limits [name="key_rate"]').send_keys("10/1m")
    page.follow(page.find("#set-limits"))

    shown = "0 of 3 running, 0 of 100/m started, 2 running per key, 10/m started per key"
    assert page.text("#limits") == shown
    assert _limits(dashboard_service, "browser-limits") == {
        "concurrency": 3,
        "running": 0,
        "rate": "100/m",
        "started": 0,
        "set_by": "operator",
        "key_concurrency": 2,
        "key_rate": "10/m",
        "type_rates": None,
        "type_started": None,
    }
    page.screenshots("queue-limits")
    page.visit("/ui")
    row = 'tr[data-queue="browser-limits"] [data-column="limits"]'
    assert page.text(row) == shown

    # A rate no one can mean is refused, saying why, and changes nothing.
    page.visit("/ui/queues/browser-limits")
    page.expect_console_error(r"400 \(Bad Request\)")
    rate = page.find('form.limits [name="rate"]')
    rate.clear()
    rate.send_keys("5/2d")
    page.follow(page.find("#set-limits"))
    assert "invalid duration '2d'" in page.text(".message")
    assert _limits(dashboard_service, "browser-limits")["rate"] == "100/m"
    # So is a key rate, naming its field.
    page.visit("/ui/queues/browser-limits")
    page.expect_console_error(r"400 \(Bad Request\)")
    key_rate = page.find('form.limits [name="key_rate"]')
    key_rate.clear()
    key_rate.send_keys("0/1m")
    page.follow(page.find("#set-limits"))
    assert "starts per key: a rate limit must be between 1 and" in page.text(".message")
    assert _limits(dashboard_service, "browser-limits")["key_rate"] == "10/m"

    # Every field emptied: the limits are lifted.
    page.visit("/ui/queues/browser-limits")
    for field in ("concurrency", "rate", "key_concurrency", "key_rate"):
        page.find(f'form.limits [name="{field}"]').clear()
    page.follow(page.find("#set-limits"))
    assert page.text("#limits").startswith("None")
    assert _limits(dashboard_service, "browser-limits")["concurrency"] is None
    assert _limits(dashboard_service, "browser-limits")["key_rate"] is None


def test_a_person_rates_a_queue_s_types_from_its_page_and_sees_their_starts(
    page: Page, dashboard_service: Service
) -> None:
    # The service consumes `default`: its `sleep` job starts, and counts against its rate.
    try:
        page.visit("/ui/queues/default")
        page.find('form.limits [name="concurrency"]').send_keys("3")
        page.find('form.limits [name="type_rates"]').send_keys("sleep:5/1m, fax : 1/1m")
        page.follow(page.find("#set-limits"))
        assert (
            page.text("#limits") == "0 of 3 running, 0 of 1/m fax started, 0 of 5/m sleep started"
        )
        limits = _limits(dashboard_service, "default")
        assert (limits["type_rates"], limits["type_started"]) == (
            {"fax": "1/m", "sleep": "5/m"},
            {"fax": 0, "sleep": 0},
        )
        page.screenshots("queue-type-rates")

        body = {"type": "sleep", "payload": {"duration": "1ms"}}
        answer = httpx.post(f"{dashboard_service.base_url}/jobs", json=body, timeout=10)
        assert answer.status_code == 201, answer.text
        started = "0 of 1/m fax started, 1 of 5/m sleep started"

        def shown() -> bool:
            page.visit("/ui/queues/default")
            return page.text("#limits").endswith(started)

        page.until(shown, "the queue page shows the sleep job's start")
        page.visit("/ui")
        row = 'tr[data-queue="default"] [data-column="limits"]'
        assert page.text(row).endswith(started)

        # A bad type's rate is refused, naming the field and the type, and changes nothing;
        # so are rates per type beside limits per key.
        for field, value, says in (
            ("type_rates", "sleep:5/1m, fax:fast", "starts per type: type 'fax': a rate is"),
            ("key_concurrency", "2", "rates per job type cannot be combined with limits per"),
        ):
            page.visit("/ui/queues/default")
            page.expect_console_error(r"400 \(Bad Request\)")
            typed = page.find(f'form.limits [name="{field}"]')
            typed.clear()
            typed.send_keys(value)
            page.follow(page.find("#set-limits"))
            assert says in page.text(".message")
            assert _limits(dashboard_service, "default")["type_rates"] == {
                "fax": "1/m",
                "sleep": "5/m",
            }

        # The field emptied: the types are paced no more; the concurrency stays.
        page.visit("/ui/queues/default")
        page.find('form.limits [name="type_rates"]').clear()
        page.follow(page.find("#set-limits"))
        assert page.text("#limits") == "0 of 3 running"
        assert _limits(dashboard_service, "default")["type_rates"] is None
    finally:
        httpx.delete(f"{dashboard_service.base_url}/queues/default/limits", timeout=10)
