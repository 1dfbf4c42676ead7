"""A headless Chromium driving the dashboard on a real `jobqueue serve`, for the browser
tests of every dashboard page.

Debian's `chromium` through its `chromedriver` (scripts/prerequisites.sh installs both),
driven by Selenium. One browser per test process (each xdist worker has its own, with a
profile of its own) and one service per test module; a `page` per test, which fails the
test on any console error and on any request outside the service's origin, read from
Chrome's own logs when the test ends. `page.screenshots(name)` writes the page at each
viewport into build/screenshots/ (kept after the run).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service as DriverService
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.expected_conditions import staleness_of
from selenium.webdriver.support.wait import WebDriverWait

from tests.support.processes import REPO_ROOT, Service, serving

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
SCREENSHOTS = REPO_ROOT / "build" / "screenshots"
# (width, height) in CSS pixels: a laptop's window, and a phone's (an iPhone 12–15).
VIEWPORTS = ((1280, 800), (390, 844))
# How long a page may take to show what a test waits for: generous, on a shared machine.
PATIENCE = 30.0


def _chromium(profile: str) -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        # As root (a container, CI) Chromium's sandbox cannot start.
        "--no-sandbox",
        # A container's /dev/shm is small; Chromium would crash on big pages.
        "--disable-dev-shm-usage",
        "--disable-gpu",
        # No traffic of the browser's own (updates, safe browsing, metrics) in the logs.
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--no-default-browser-check",
        f"--window-size={VIEWPORTS[0][0]},{VIEWPORTS[0][1]}",
        # A profile per browser, so that xdist workers' browsers never share one.
        f"--user-data-dir={profile}",
    ):
        options.add_argument(argument)
    # The console's messages and the network's events, read back with `get_log`.
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    # The driver given, never Selenium Manager's download of one.
    return webdriver.Chrome(options=options, service=DriverService(str(CHROMEDRIVER)))


@pytest.fixture(scope="session")
def browser() -> Iterator[webdriver.Chrome]:
    """One headless Chromium for this test process."""
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.exists()]
    if missing:
        pytest.fail(f"the browser tests need {', '.join(missing)}: run scripts/prerequisites.sh")
    # Removed with the browser: each run left one in the temporary directory per worker.
    with tempfile.TemporaryDirectory(
        prefix="jobqueue-chromium-", ignore_cleanup_errors=True
    ) as profile:
        driver = _chromium(profile)
        try:
            yield driver
        finally:
            driver.quit()


@pytest.fixture(scope="module")
def dashboard_service(
    database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    """`jobqueue serve` on this module's database, consuming the `default` queue only."""
    with serving(
        ["serve"], tmp_path_factory.mktemp("dashboard"), DATABASE_URL=database_url, QUEUES="default"
    ) as running:
        yield running


@dataclass
class Page:
    """The browser on the service, for one test."""

    driver: webdriver.Chrome
    origin: str
    name: str
    # Console errors a test expects (an error page's own 404), as patterns of their text.
    expected_errors: list[re.Pattern[str]] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    outside_requests: list[str] = field(default_factory=list)

    def visit(self, path: str) -> None:
        """Load `path` at the first viewport, and wait until htmx settled it."""
        self.viewport(*VIEWPORTS[0])
        self.driver.get(f"{self.origin}{path}")
        self.settled()

    def viewport(self, width: int, height: int) -> None:
        # Emulated exactly: a window's size would include what the browser draws around.
        self.driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600},
        )

    def follow(self, element: WebElement) -> None:
        """Click `element` (a link, a form's button) and wait for the page it leads to.

        Waiting for `settled` alone could pass on the page clicked from, before the
        browser had even started to leave it."""
        leaving = self.driver.find_element("tag name", "html")
        element.click()

        def left() -> bool:
            try:
                return bool(staleness_of(leaving)(self.driver))
            except WebDriverException as error:
                # Chrome's answer while the old document is being torn down: it is going.
                if "does not belong to the document" in str(error):
                    return True
                raise

        self.until(left, "the next page replaced this one")
        self.settled()

    def settled(self) -> None:
        """Wait until the document loaded, htmx started, and no htmx request or swap is
        under way."""
        self.until(
            lambda: self.driver.execute_script(
                "return document.readyState === 'complete' && window.htmx !== undefined && "
                "!document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')"
            ),
            "the page loaded and htmx settled",
        )

    def until(self, condition: Callable[[], Any], what: str, within: float = PATIENCE) -> Any:
        """What `condition` returns once truthy, polled; fails saying `what` did not
        happen."""
        # An element an htmx swap replaced meanwhile is looked at again at the next poll.
        return WebDriverWait(
            self.driver,
            within,
            poll_frequency=0.05,
            ignored_exceptions=[StaleElementReferenceException],
        ).until(lambda _: condition(), message=f"timed out waiting until {what}")

    def find(self, selector: str) -> WebElement:
        return self.driver.find_element("css selector", selector)

    def text(self, selector: str) -> str:
        """The text of the first element matching `selector`, or "" when there is none.
        Read in the page in one step: found first and read after, the element may have
        been swapped out by an htmx refresh in between (a stale element)."""
        found = self.driver.execute_script(
            "const found = document.querySelector(arguments[0]);"
            "return found === null ? '' : found.innerText.trim();",
            selector,
        )
        return str(found)

    def expect_console_error(self, pattern: str) -> None:
        self.expected_errors.append(re.compile(pattern))

    def screenshots(self, page: str) -> list[Path]:
        """The page as it is, at every viewport: build/screenshots/<page>-<w>x<h>.png."""
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        written = []
        for width, height in VIEWPORTS:
            self.viewport(width, height)
            self.settled()
            path = SCREENSHOTS / f"{page}-{width}x{height}.png"
            if not self.driver.save_screenshot(str(path)):
                raise AssertionError(f"Chromium wrote no screenshot to {path}")
            written.append(path)
        self.viewport(*VIEWPORTS[0])
        return written

    def read_logs(self) -> None:
        """Takes what Chrome logged since the last read into `console_errors` and
        `outside_requests`."""
        for entry in chrome_log(self.driver, "browser"):
            message = str(entry.get("message", ""))
            if entry.get("level") == "SEVERE" and not any(
                pattern.search(message) for pattern in self.expected_errors
            ):
                self.console_errors.append(message)
        for entry in chrome_log(self.driver, "performance"):
            event = json.loads(entry["message"])["message"]
            if event.get("method") == "Network.requestWillBeSent":
                url = str(event["params"]["request"]["url"])
                if not url.startswith(f"{self.origin}/"):
                    self.outside_requests.append(url)


def chrome_log(driver: webdriver.Chrome, kind: str) -> list[dict[str, Any]]:
    """What Chrome logged of `kind` since it was last read (the read empties it)."""
    # Selenium leaves `get_log` unannotated; it answers WebDriver's JSON log entries.
    entries: list[dict[str, Any]] = driver.get_log(kind)  # type: ignore[no-untyped-call]
    return entries


@pytest.fixture
def page(
    browser: webdriver.Chrome, dashboard_service: Service, request: pytest.FixtureRequest
) -> Iterator[Page]:
    """The browser on the module's service, blank; the test fails if the page logged a
    console error or asked anything of another origin."""
    browser.get("about:blank")
    chrome_log(browser, "browser")
    chrome_log(browser, "performance")
    opened = Page(browser, dashboard_service.base_url, request.node.name)
    yield opened
    opened.read_logs()
    assert not opened.console_errors, f"console errors: {opened.console_errors}"
    assert not opened.outside_requests, f"requests outside the service: {opened.outside_requests}"
