"""A workflow's dashboard page in a real headless Chromium on a real `jobqueue serve`:
a person sees a workflow's jobs with a waiting and a cancelled one, what each waits for
and the counts; retries its failed steps through the confirmation page and sees them
back; then watches, without reloading, a step cancelled elsewhere cancel what waited for
it. A job type holding `<script>` shows as text. The `page` fixture fails a test on any
console error or request elsewhere; screenshots go to build/screenshots/workflow-*.png.
"""

from __future__ import annotations

import asyncio
from uuid import UUID

import httpx
import pytest
from selenium.common.exceptions import NoAlertPresentException

from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.dependencies import Step
from jobqueue.domain.job import Job, NewJob
from tests.support.browser import Page, browser, dashboard_service, page
from tests.support.processes import Service

pytestmark = pytest.mark.slow

# Fixtures of tests.support.browser, used by name.
__all__ = ["browser", "dashboard_service", "page"]

HOSTILE = "<script>alert(1)</script>"
# No process consumes it (the service consumes `default`): its jobs stay as they are put.
HELD = "held"


def _workflow(database_url: str) -> list[Job]:
    """A workflow whose jobs no worker takes: `extract` pending, `transform` waiting for
    it, `flaky` cancelled, `load` cancelled as `flaky` was, and a callback of a hostile
    type waiting for `transform` and `load`, whatever their ends."""

    def new(kind: str, *, run_anyway: bool = False) -> NewJob:
        return NewJob.build(type=kind, queue=HELD, max_attempts=1, run_anyway=run_anyway)

    async def submit() -> list[Job]:
        engine = create_engine(database_url, pool_size=1)
        try:
            store = PostgresJobStore(engine)
            submitted = await store.submit_graph(
                [
                    Step(new("extract"), name="extract"),
                    Step(new("transform"), name="transform", after=("extract",)),
                    Step(new("flaky"), name="flaky"),
                    Step(new("load"), name="load", after=("flaky",)),
                    Step(new(HOSTILE, run_anyway=True), after=("transform", "load")),
                ]
            )
            await store.cancel(submitted[2].job.id)
            return [await store.get(each.job.id) for each in submitted]
        finally:
            await engine.dispose()

    return asyncio.run(submit())


def _short(job: Job) -> str:
    return "…" + str(job.id)[-8:]


def _statuses(page: Page) -> list[str]:
    found = page.driver.execute_script(
        "return Array.from(document.querySelectorAll('#workflow-jobs [data-column=status]'))"
        ".map(cell => cell.innerText.trim());"
    )
    return [str(each) for each in found]


def _counts(page: Page) -> dict[str, str]:
    found = page.driver.execute_script(
        "const counts = {};"
        "document.querySelectorAll('#workflow-counts dd').forEach("
        "  dd => { counts[dd.dataset.count] = dd.innerText.trim(); });"
        "return counts;"
    )
    return {str(key): str(value) for key, value in found.items()}


def test_failed_steps_are_retried_through_the_page_and_a_cancel_elsewhere_shows_live(
    page: Page, dashboard_service: Service, database_url: str
) -> None:
    jobs = _workflow(database_url)
    extract, transform, flaky, load, _report = jobs
    workflow = jobs[0].workflow_id
    assert isinstance(workflow, UUID)

    page.visit(f"/ui/workflows/{workflow}")

    assert page.text("h1") == f"Workflow {workflow}"
    assert _statuses(page) == ["pending", "waiting", "cancelled", "cancelled", "waiting"]
    assert _counts(page) == {"total": "5", "waiting": "2", "pending": "1", "cancelled": "2"}
    assert page.text('[data-fact="state"]') == "in progress"
    assert page.text('[data-step="5"] [data-column="type"]') == HOSTILE
    assert page.text('[data-step="2"] [data-column="waits-for"]') == "#1 extract\nwaiting for 1"
    assert page.text('[data-step="5"] [data-column="waits-for"]') == (
        "#2 transform\n#4 load\nwaiting for 1\nruns anyway"
    )
    assert str(flaky.id) in page.text('[data-step="4"] [data-column="error"]')
    with pytest.raises(NoAlertPresentException):
        page.driver.switch_to.alert  # noqa: B018 (raises when there is no alert)
    # A dependency's link leads to its job's page, and the job's page back here.
    page.follow(page.find('[data-step="2"] [data-column="waits-for"] a'))
    assert page.driver.current_url.endswith(f"/ui/jobs/{extract.id}")
    page.follow(page.find('[data-fact="workflow"] a'))
    assert page.driver.current_url.endswith(f"/ui/workflows/{workflow}")
    page.screenshots("workflow")
    # The callback's page: what it depends on, that it runs anyway, what it waits for.
    page.follow(page.find('[data-step="5"] th a'))
    assert page.text('[data-fact="waiting_for"]') == "1 of 2 jobs"
    assert page.text('[data-fact="run_anyway"]').startswith("yes")
    assert page.text('[data-fact="depends_on"]') == f"{_short(transform)}\n{_short(load)}"
    page.screenshots("workflow-job")
    page.follow(page.find('[data-fact="workflow"] a'))

    page.follow(page.find("a.action-retry"))
    assert page.driver.title.endswith("? · jobqueue"), "a confirmation page"
    assert page.text('[data-fact="taken"]') == "It takes 2 jobs (2 cancelled) now."
    page.screenshots("workflow-confirm")
    page.follow(page.find("form.confirm button.action-retry"))

    assert page.driver.current_url.endswith(f"/ui/workflows/{workflow}?done=retried&count=2")
    assert page.text("p.done") == "Retried 2 jobs: each went back with a fresh budget of attempts."
    assert _statuses(page) == ["pending", "waiting", "pending", "waiting", "waiting"]
    assert page.text('[data-step="4"] [data-column="waits-for"]') == "#3 flaky\nwaiting for 1"
    assert not page.driver.find_elements("css selector", "a.action-retry"), "nothing to retry"
    page.screenshots("workflow-retried")

    # Elsewhere, `extract` is cancelled: `transform`, waiting for it, is cancelled with it,
    # and the page shows both without a reload.
    page.driver.execute_script("window.workflowPageLoaded = true")
    answer = httpx.post(f"{dashboard_service.base_url}/jobs/{extract.id}/cancel", timeout=10)
    assert answer.status_code == 200, answer.text
    page.until(
        lambda: _statuses(page)[:2] == ["cancelled", "cancelled"],
        "the page shows extract and transform cancelled",
        within=15,
    )
    assert page.driver.execute_script("return window.workflowPageLoaded === true"), "reloaded"
    assert page.text("p.done").startswith("Retried 2 jobs"), "the message stays"
    _dark(page, "workflow-dark")


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
