"""The overview's charts in a real headless Chromium on a real `jobqueue serve`: they
show what the service's own worker did, from its rollup, refreshed in place; a queue is
chosen with the keyboard; no console error and no request elsewhere (the `page`
fixture). Screenshots: `overview-charts`, and `overview-charts-dark` in dark mode."""

from __future__ import annotations

import httpx
import pytest
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.select import Select

from tests.support.browser import Page, browser, dashboard_service, page
from tests.support.processes import Service

pytestmark = pytest.mark.slow

# Fixtures of tests.support.browser, used by name.
__all__ = ["browser", "dashboard_service", "page"]

CHARTS = ("throughput-hour", "latency-hour", "throughput-day", "latency-day")
# A worker flushes every 5 s and the charts refresh every 15 s; twice that, and more.
WITHIN = 60.0


def _submit(service: Service, count: int) -> None:
    for _ in range(count):
        body = {"type": "sleep", "payload": {"duration": "1ms"}}
        answer = httpx.post(f"{service.base_url}/jobs", json=body, timeout=10)
        assert answer.status_code == 201, answer.text


def _summary(page: Page, chart: str) -> str:
    return page.text(f'[data-chart="{chart}"] .summary')


def test_the_charts_show_the_workers_attempts_without_a_reload(
    page: Page, dashboard_service: Service
) -> None:
    page.visit("/ui")
    for chart in CHARTS:
        assert page.find(f'[data-chart="{chart}"] svg title').get_attribute("id")
    assert _summary(page, "throughput-hour").startswith("0 completed")
    # SVG text has no innerText: its DOM text, as a screen reader finds it.
    empty = page.find('[data-chart="latency-hour"] svg text.empty')
    assert empty.get_attribute("textContent") == "No job was picked up in the last hour."

    _submit(dashboard_service, 3)

    page.until(
        lambda: _summary(page, "throughput-hour").startswith("3 completed"),
        "the chart showed the finished jobs without a reload",
        within=WITHIN,
    )
    assert page.driver.execute_script("return performance.getEntriesByType('navigation').length")
    assert _summary(page, "latency-hour").startswith("3 jobs picked up in the last hour")
    assert _summary(page, "throughput-day").startswith("3 completed")
    drawn = page.find('[data-chart="throughput-hour"] path[data-series="completed"]')
    line = drawn.get_attribute("d")
    assert line is not None
    assert line.startswith("M")
    assert page.find('[data-chart="latency-hour"] path[data-series="p95"]').get_attribute("d")
    # The charts, below the queues' table, in sight.
    page.driver.execute_script("document.getElementById('throughput').scrollIntoView()")
    page.screenshots("overview-charts")
    page.driver.execute_cdp_cmd(
        "Emulation.setEmulatedMedia",
        {"features": [{"name": "prefers-color-scheme", "value": "dark"}]},
    )
    try:
        page.screenshots("overview-charts-dark")
    finally:
        page.driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


def test_a_queue_is_chosen_with_the_keyboard(page: Page, dashboard_service: Service) -> None:
    page.visit("/ui")
    choice = page.find("#chart-queue")
    assert page.find('label[for="chart-queue"]').text == "Queue"
    Select(choice).select_by_value("default")
    page.find(".chart-filter button").send_keys(Keys.ENTER)

    page.until(lambda: "queue=default" in page.driver.current_url, "the filtered page loaded")
    page.settled()
    assert page.text('[data-chart="throughput-hour"] figcaption').endswith("queue default")
    charts = page.find("#charts").get_attribute("hx-get")
    assert charts == "/ui/fragments/charts?queue=default", "the refresh keeps the filter"
    assert Select(page.find("#chart-queue")).first_selected_option.text == "default"
