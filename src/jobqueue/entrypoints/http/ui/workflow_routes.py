"""A workflow's page (`/ui/workflows/{id}`), its live status part, and its actions:
cancel the workflow and retry its failed steps, each a confirmation page (GET) and a form
(POST) that acts.

As a job's actions do (`job_routes.py`): the form goes through `action_form` first
(session, CSRF token, DASHBOARD_READ_ONLY), then the same `JobService` call as the API's
route, and the browser is sent back to the workflow's page saying what was done (303,
`?done=`, `&count=`). An action that found nothing to act on (the jobs changed since the
confirmation: they ended, or were retried by someone else) is the workflow's page again,
saying so (409), and changed nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Final
from uuid import UUID

from litestar import Controller, Request, Response, get, post
from litestar.datastructures import CacheControlHeader
from litestar.di import NamedDependency
from litestar.exceptions import NotFoundException
from litestar.params import PathParameter, QueryParameter
from litestar.response import Redirect, Template
from litestar.status_codes import HTTP_303_SEE_OTHER, HTTP_409_CONFLICT

from jobqueue.entrypoints.http.middleware import DASHBOARD
from jobqueue.entrypoints.http.service import JobService
from jobqueue.entrypoints.http.ui.actions import ACTION, action_form
from jobqueue.entrypoints.http.ui.frame import PAGE_HEADERS, DashboardAccess, page
from jobqueue.entrypoints.http.ui.links import WORKFLOW_PAGES, workflow_page
from jobqueue.entrypoints.http.ui.workflow_page import (
    BY_NAME,
    WorkflowAction,
    WorkflowView,
    done_message,
    workflow_view,
)
from jobqueue.entrypoints.http.workflow_routes import WorkflowId, parse_workflow_id

_SIGNED_IN: Final = {DASHBOARD: True}
# Its values listed, not checked here (an unknown one is a 404, by `_action`): what the
# dashboard bench fills the confirmation's URL with (`bench/dashboard/pages.py`).
ActionName = Annotated[
    str, PathParameter(description="cancel or retry", schema_extra={"enum": list(BY_NAME)})
]
QueryText = Annotated[str | None, QueryParameter(required=False)]

# What each action calls: the API's own operations on a workflow, each answering how many
# jobs it took.
_PERFORMED: Final[dict[str, Callable[[JobService, UUID], Awaitable[int]]]] = {
    "cancel": JobService.cancel_workflow,
    "retry": JobService.retry_workflow,
}


class WorkflowPageController(Controller):
    path = WORKFLOW_PAGES
    include_in_schema = False
    response_headers = PAGE_HEADERS
    # A workflow changes while a person looks at it: never served from a cache.
    cache_control = CacheControlHeader(no_store=True)

    @get("/{workflow_id:str}", name="ui-workflow", opt=_SIGNED_IN)
    async def workflow(
        self,
        request: Request[Any, Any, Any],
        workflow_id: WorkflowId,
        jobs: NamedDependency[JobService],
        access: NamedDependency[DashboardAccess],
        done: QueryText = None,
        count: QueryText = None,
    ) -> Template:
        view = await _view(jobs, parse_workflow_id(workflow_id))
        context: dict[str, object] = {
            "view": view,
            "message": done_message(done, count),
            "problem": None,
        }
        return page(request, access, "workflow.html", context)

    @get("/{workflow_id:str}/fragments/status", name="ui-workflow-status-fragment", opt=_SIGNED_IN)
    async def status_fragment(
        self, workflow_id: WorkflowId, jobs: NamedDependency[JobService]
    ) -> Template:
        """The workflow's counts, actions and table alone, which its page asks for every
        few seconds until every job of it ended."""
        view = await _view(jobs, parse_workflow_id(workflow_id))
        return Template(template_name="fragments/workflow_status.html", context={"view": view})

    @get("/{workflow_id:str}/{action:str}", name="ui-workflow-confirm", opt=_SIGNED_IN)
    async def confirm(
        self,
        request: Request[Any, Any, Any],
        workflow_id: WorkflowId,
        action: ActionName,
        jobs: NamedDependency[JobService],
        access: NamedDependency[DashboardAccess],
    ) -> Template:
        """The confirmation an action asks for: what it will do, to how many of the
        workflow's jobs now, and the form that does it (none when it would take none, or
        the dashboard is read-only)."""
        chosen = _action(action)
        view = await _view(jobs, parse_workflow_id(workflow_id))
        context = {"view": view, "action": chosen, "taken": view.taken(chosen)}
        return page(request, access, "workflow_confirm.html", context)

    @post(
        "/{workflow_id:str}/{action:str}",
        name="ui-workflow-action",
        status_code=HTTP_303_SEE_OTHER,
        opt=ACTION,
    )
    async def act(
        self,
        request: Request[Any, Any, Any],
        workflow_id: WorkflowId,
        action: ActionName,
        jobs: NamedDependency[JobService],
        access: NamedDependency[DashboardAccess],
    ) -> Response[Any]:
        await action_form(request, access)
        chosen = _action(action)
        wanted = parse_workflow_id(workflow_id)
        # An unknown workflow is the API's 404 (`WorkflowNotFound`), as a page.
        acted = await _PERFORMED[chosen.name](jobs, wanted)
        if not acted:
            # The workflow as it is now, and why nothing was done.
            problem = f"cannot {chosen.label.lower()}: {chosen.nothing}."
            context: dict[str, object] = {
                "view": await _view(jobs, wanted),
                "message": None,
                "problem": problem,
            }
            return page(request, access, "workflow.html", context, HTTP_409_CONFLICT)
        return Redirect(
            f"{workflow_page(wanted)}?done={chosen.done}&count={acted}",
            status_code=HTTP_303_SEE_OTHER,
        )


async def _view(jobs: JobService, workflow_id: UUID) -> WorkflowView:
    return workflow_view(workflow_id, await jobs.workflow(workflow_id))


def _action(name: str) -> WorkflowAction:
    found = BY_NAME.get(name)
    if found is None:
        # Answered as any path that names nothing ("no route for …").
        raise NotFoundException()
    return found
