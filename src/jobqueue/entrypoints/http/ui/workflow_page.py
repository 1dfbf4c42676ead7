"""A workflow's page: its jobs in submission order, what each one waits for, its counts by
status, whether it ended, and the actions it allows.

Built here rather than in the template, as a job's page is (`job_page.py`), so that how a
dependency is named, where an error is cut, and which actions a workflow offers are plain
code a unit test reads. An action is offered when one of the workflow's jobs is in a
status the domain's table lets it start from (`transitions.py`): cancelling takes its
jobs a job's cancel takes, retrying its failed steps those `RETRY_WORKFLOW` takes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final
from uuid import UUID

from jobqueue.domain.dependencies import MAX_WORKFLOW_JOBS
from jobqueue.domain.job import Job
from jobqueue.domain.status import LIVE, Status
from jobqueue.domain.transitions import Operation, sources
from jobqueue.entrypoints.http.ui.job_page import Moment
from jobqueue.entrypoints.http.ui.jobs import cut_error, shown_time
from jobqueue.entrypoints.http.ui.links import Link, Links, job_link, job_page, links_to, short

# How often a workflow that has not ended asks for its status part again.
REFRESH_SECONDS: Final = 5
# Rows of the table: a workflow may have 10,000 jobs (`MAX_WORKFLOW_JOBS`), and a page of
# them all, refreshed every few seconds, would be megabytes. The counts cover every job
# read; the API's `GET /workflows/{id}` lists them all.
SHOWN_ROWS: Final = 500
# Dependencies named in a row (a callback may wait for a thousand jobs).
SHOWN_DEPENDENCIES: Final = 5


@dataclass(frozen=True, slots=True)
class WorkflowAction:
    # Its path under the workflow's (`/ui/workflows/{id}/{name}`): the confirmation, then
    # the POST.
    name: str
    label: str
    # The confirmation's question, before the workflow's id.
    asks: str
    # The `?done=` the page is sent back with; what it then says (`{jobs}`: "3 jobs").
    done: str
    said: str
    allowed: frozenset[Status]
    # What the confirmation says will happen, and what it says when no job is left to
    # act on (nothing would be done).
    consequence: str
    nothing: str


ACTIONS: Final = (
    WorkflowAction(
        name="cancel",
        label="Cancel workflow",
        asks="Cancel workflow",
        done="cancelled",
        said="Cancelled {jobs}: those that had not ended will not run.",
        allowed=sources(Operation.CANCEL),
        consequence="Each of its jobs that has not ended is cancelled: a waiting or pending "
        "one never runs, a running one is stopped by its worker, and nothing its handler "
        "does from then on is recorded. Jobs that ended stay as they are. Retrying its "
        "failed steps later runs the cancelled ones again.",
        nothing="none of its jobs is waiting, pending or running",
    ),
    WorkflowAction(
        name="retry",
        label="Retry failed steps",
        asks="Retry the failed steps of workflow",
        done="retried",
        said="Retried {jobs}: each went back with a fresh budget of attempts.",
        allowed=sources(Operation.RETRY_WORKFLOW),
        consequence="Each of its failed, dead-lettered and cancelled jobs goes back with a "
        "fresh budget of attempts, its history kept: waiting again for those of its "
        "dependencies retried with it (or still running), else pending. Jobs that "
        "completed are not run again, so the workflow runs on from where it stopped.",
        nothing="none of its jobs failed, was dead-lettered or was cancelled",
    ),
)
BY_NAME: Final = {action.name: action for action in ACTIONS}


def jobs_text(count: int) -> str:
    return f"{count:,} job{'' if count == 1 else 's'}"


def done_message(done: str | None, count: str | None = None) -> str | None:
    """What the page says after an action (`?done=`, and `&count=` how many jobs it took);
    None for any other `done`. A count that is not a number is left unsaid."""
    action = next((each for each in ACTIONS if each.done == done), None)
    if action is None:
        return None
    jobs = "its jobs"
    if count is not None and count.isascii() and count.isdigit() and len(count) <= 6:
        jobs = jobs_text(int(count))
    return action.said.format(jobs=jobs)


@dataclass(frozen=True, slots=True)
class WorkflowRow:
    # Its place in submission order, from 1: how the rows waiting for it name it.
    step: int
    id: str
    # The link's text: the end of its id.
    short_id: str
    href: str
    type: str
    status: Status
    # The jobs it depends on, linked; how many have not ended while it waits (None when it
    # is not waiting); whether it runs even if one of them does not complete.
    waits_for: Links
    waiting_for: int | None
    run_anyway: bool
    error: str
    started: Moment | None
    finished: Moment | None


@dataclass(frozen=True, slots=True)
class Taken:
    """The jobs an action would take now: how many, and how many of each status."""

    count: int
    by_status: tuple[tuple[Status, int], ...]

    @property
    def text(self) -> str:
        parts = ", ".join(f"{n:,} {status.value.replace('_', ' ')}" for status, n in self.by_status)
        return f"{jobs_text(self.count)} ({parts})" if parts else jobs_text(0)


@dataclass(frozen=True, slots=True)
class WorkflowView:
    id: UUID
    rows: tuple[WorkflowRow, ...]
    # Every status some job read is in, with how many: in the statuses' order.
    counts: tuple[tuple[Status, int], ...]
    total: int
    # Every job read has ended; every one completed.
    ended: bool
    completed: bool
    actions: tuple[WorkflowAction, ...]
    # Fewer than MAX_WORKFLOW_JOBS were read, so every job of it was; else it may have
    # more, which nothing here counts.
    read_all: bool
    refresh_seconds: int = REFRESH_SECONDS

    @property
    def not_ended(self) -> int:
        return sum(n for status, n in self.counts if status in LIVE)

    @property
    def not_completed(self) -> int:
        return sum(n for status, n in self.counts if status is not Status.COMPLETED)

    def taken(self, action: WorkflowAction) -> Taken:
        by_status = tuple((s, n) for s, n in self.counts if s in action.allowed)
        return Taken(sum(n for _, n in by_status), by_status)


def workflow_view(workflow_id: UUID, jobs: Sequence[Job]) -> WorkflowView:
    """The page of the workflow whose jobs (in submission order) are `jobs`."""
    steps = {job.id: (step, job) for step, job in enumerate(jobs, start=1)}
    counted = Counter(job.status for job in jobs)
    counts = tuple((status, counted[status]) for status in Status if counted[status])
    ended = not any(job.status in LIVE for job in jobs)
    return WorkflowView(
        id=workflow_id,
        rows=tuple(_row(step, job, steps) for step, job in enumerate(jobs[:SHOWN_ROWS], 1)),
        counts=counts,
        total=len(jobs),
        ended=ended,
        completed=ended and counted[Status.COMPLETED] == len(jobs),
        actions=tuple(a for a in ACTIONS if any(s in a.allowed for s, _ in counts)),
        read_all=len(jobs) < MAX_WORKFLOW_JOBS,
    )


def _row(step: int, job: Job, steps: dict[UUID, tuple[int, Job]]) -> WorkflowRow:
    def named(dependency: UUID) -> Link:
        found = steps.get(dependency)
        if found is None:
            # Outside this workflow (a stored job it was submitted after), or past the
            # jobs read: by its id alone.
            return job_link(dependency)
        place, other = found
        return Link(
            job_page(dependency), f"#{place} {other.type}", f"{dependency}: {other.status.value}"
        )

    finished = job.finished_at
    return WorkflowRow(
        step=step,
        id=str(job.id),
        short_id=short(job.id),
        href=job_page(job.id),
        type=job.type,
        status=job.status,
        waits_for=links_to(job.depends_on or (), SHOWN_DEPENDENCIES, named),
        waiting_for=job.waiting_for if job.status is Status.WAITING else None,
        run_anyway=job.run_anyway,
        error=cut_error(job.last_error),
        started=None if job.started_at is None else _table_moment(job.started_at),
        finished=None if finished is None else _table_moment(finished),
    )


def _table_moment(value: datetime) -> Moment:
    """A moment as a table's cell shows it: UTC, to the second (the column says UTC)."""
    return Moment(value.astimezone(UTC).isoformat(), shown_time(value))
