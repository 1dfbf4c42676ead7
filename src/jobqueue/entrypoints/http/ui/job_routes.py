"""One job's page (`/ui/jobs/{id}`), its live status part, and its actions: retry, cancel
and discard, each a confirmation page (GET) and a form (POST) that acts.

An action goes through `action_form` first (session, CSRF token, DASHBOARD_READ_ONLY),
then the same `JobService` call as the API's route, and sends the browser back to the
job's page saying what it did (303, `?done=`). The store decides whether the job's
status allows it, in the same statement that acts: a job that changed meanwhile (it
finished before the cancel arrived) is the job's page again, saying why nothing was done
(409), never a 500.
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

from jobqueue.domain.errors import InvalidTransition, JobNotFound, UniqueKeyHeld
from jobqueue.domain.job import Job
from jobqueue.entrypoints.http.middleware import DASHBOARD
from jobqueue.entrypoints.http.parameters import JobId, parse_job_id
from jobqueue.entrypoints.http.service import JobService
from jobqueue.entrypoints.http.ui.actions import ACTION, action_form
from jobqueue.entrypoints.http.ui.frame import PAGE_HEADERS, UI_PATH, DashboardAccess, page
from jobqueue.entrypoints.http.ui.job_page import (
    BY_NAME,
    DISCARDED,
    JobAction,
    done_message,
    job_view,
    payload_shown,
)

JOBS_PATH: Final = f"{UI_PATH}/jobs"
_SIGNED_IN: Final = {DASHBOARD: True}
# Its values listed, not checked here (an unknown one is a 404, by `_action`): what the
# dashboard bench fills the confirmation's URL with (`bench/dashboard/pages.py`).
ActionName = Annotated[
    str,
    PathParameter(description="retry, cancel or discard", schema_extra={"enum": list(BY_NAME)}),
]

# What each action calls: the API's own operations on one job.
_PERFORMED: Final[dict[str, Callable[[JobService, UUID], Awaitable[Job]]]] = {
    "retry": JobService.retry,
    "cancel": JobService.cancel,
    "discard": JobService.delete,
}


def job_href(job_id: UUID) -> str:
    return f"{JOBS_PATH}/{job_id}"


class JobPageController(Controller):
    path = JOBS_PATH
    include_in_schema = False
    response_headers = PAGE_HEADERS
    # A job changes while a person looks at it: never served from a cache.
    cache_control = CacheControlHeader(no_store=True)

    @get("/{job_id:str}", name="ui-job", opt=_SIGNED_IN)
    async def job(
        self,
        request: Request[Any, Any, Any],
        job_id: JobId,
        jobs: NamedDependency[JobService],
        access: NamedDependency[DashboardAccess],
        done: Annotated[str | None, QueryParameter(required=False)] = None,
    ) -> Template:
        wanted = parse_job_id(job_id)
        try:
            job = await jobs.get(wanted)
        except JobNotFound:
            if done != DISCARDED:
                raise
            # Sent here by its own discard: the job's absence is what was asked for.
            return page(request, access, "job_discarded.html", {"job_id": wanted})
        return _job_page(request, access, job, message=done_message(done), problem=None)

    @get("/{job_id:str}/fragments/status", name="ui-job-status-fragment", opt=_SIGNED_IN)
    async def status_fragment(self, job_id: JobId, jobs: NamedDependency[JobService]) -> Template:
        """The job's status, progress, facts, result, actions and attempts alone, which
        its page asks for every few seconds while the job is pending or running (so its
        progress bar moves, and its result shows once it completed)."""
        view = job_view(await jobs.get(parse_job_id(job_id)))
        return Template(template_name="fragments/job_status.html", context={"view": view})

    @get("/{job_id:str}/{action:str}", name="ui-job-confirm", opt=_SIGNED_IN)
    async def confirm(
        self,
        request: Request[Any, Any, Any],
        job_id: JobId,
        action: ActionName,
        jobs: NamedDependency[JobService],
        access: NamedDependency[DashboardAccess],
    ) -> Template:
        """The confirmation an action asks for: what it will do, and the form that does it
        (none when the job's status does not allow it, or the dashboard is read-only)."""
        chosen = _action(action)
        job = await jobs.get(parse_job_id(job_id))
        context = {"job": job, "action": chosen, "allowed": job.status in chosen.allowed}
        return page(request, access, "job_confirm.html", context)

    @post(
        "/{job_id:str}/{action:str}",
        name="ui-job-action",
        status_code=HTTP_303_SEE_OTHER,
        opt=ACTION,
    )
    async def act(
        self,
        request: Request[Any, Any, Any],
        job_id: JobId,
        action: ActionName,
        jobs: NamedDependency[JobService],
        access: NamedDependency[DashboardAccess],
    ) -> Response[Any]:
        await action_form(request, access)
        chosen = _action(action)
        wanted = parse_job_id(job_id)
        try:
            await _PERFORMED[chosen.name](jobs, wanted)
        except (InvalidTransition, UniqueKeyHeld) as refused:
            # The job as it is now, and why it was left so.
            now = await jobs.get(wanted)
            shown = _job_page(request, access, now, message=None, problem=str(refused))
            shown.status_code = HTTP_409_CONFLICT
            return shown
        return Redirect(f"{job_href(wanted)}?done={chosen.done}", status_code=HTTP_303_SEE_OTHER)


def _action(name: str) -> JobAction:
    found = BY_NAME.get(name)
    if found is None:
        # Answered as any path that names nothing ("no route for …").
        raise NotFoundException()
    return found


def _job_page(
    request: Request[Any, Any, Any],
    access: DashboardAccess,
    job: Job,
    *,
    message: str | None,
    problem: str | None,
) -> Template:
    context = {
        "view": job_view(job),
        "payload": payload_shown(job.payload),
        "message": message,
        "problem": problem,
    }
    return page(request, access, "job.html", context)
