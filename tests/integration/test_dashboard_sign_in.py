"""Signing in to the dashboard through the page alone, in a real headless Chromium, on a
`jobqueue serve` with API_TOKENS: sent to the sign-in page, a wrong token refused, the
right one brings the person back to the page they asked for, and signing out ends it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.browser import Page, browser, page
from tests.support.processes import Service, serving

pytestmark = pytest.mark.slow

# Fixtures of tests.support.browser, used by name.
__all__ = ["browser", "page"]

TOKEN = "dashboard-token"


@pytest.fixture(scope="module")
def dashboard_service(
    database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    """This module's service asks for a token."""
    with serving(
        ["serve"],
        tmp_path_factory.mktemp("sign-in"),
        DATABASE_URL=database_url,
        QUEUES="default",
        API_TOKENS=TOKEN,
    ) as running:
        yield running


def _sign_in_with(page: Page, token: str) -> None:
    field = page.find("#token")
    field.clear()
    field.send_keys(token)
    page.follow(page.find("form.sign-in button"))


def test_a_person_signs_in_and_out_through_the_page(page: Page) -> None:
    page.visit("/ui")
    page.until(lambda: "/ui/sign-in" in page.driver.current_url, "sent to sign in")
    assert page.driver.title == "Sign in · jobqueue"
    page.screenshots("sign-in")

    # The browser reports the 401 of the refused sign-in in its console.
    page.expect_console_error(r"401 \(Unauthorized\)")
    _sign_in_with(page, "not-the-token")
    assert "not one of the service's API_TOKENS" in page.text(".problem")

    _sign_in_with(page, TOKEN)
    page.until(lambda: page.driver.current_url.endswith("/ui"), "brought back to the overview")
    assert page.driver.title == "Overview · jobqueue"
    assert page.find('tr[data-queue="default"]')
    cookie = page.driver.get_cookie("jobqueue_session")
    assert cookie is not None
    assert (cookie["httpOnly"], cookie["sameSite"], cookie["path"]) == (True, "Strict", "/ui")

    page.follow(page.find("form.sign-out button"))
    page.until(lambda: "/ui/sign-in" in page.driver.current_url, "signed out")
    page.visit("/ui")
    page.until(lambda: "/ui/sign-in" in page.driver.current_url, "sent to sign in again")
