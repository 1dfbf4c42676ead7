"""One job's page: what it shows of a job, and the actions its status allows.

Built here rather than in the template so that a cut payload or result, a duration, how
a progress report reads, and which actions a status offers are plain code a unit test
reads; the template lays them out.
Which statuses an action starts from is the domain's table (`transitions.py`), never
restated here: the store refuses what the table refuses, and the page offers only that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

import msgspec

from jobqueue.adapters.telemetry.trace_context import trace_id
from jobqueue.domain.attempts import AttemptRecord, Outcome
from jobqueue.domain.durations import format_duration
from jobqueue.domain.fields import JsonValue
from jobqueue.domain.job import Job
from jobqueue.domain.progress import Progress
from jobqueue.domain.status import TRAITS, Phase, Status
from jobqueue.domain.transitions import DELETABLE, Operation, sources
from jobqueue.entrypoints.http.ui.links import Links, links_to, workflow_link
from jobqueue.entrypoints.http.ui.overview import age

# A payload or a result is shown up to this many bytes of its pretty JSON: a page of
# megabytes helps nobody read it (a result may be RESULT_MAX_BYTES, 1 MiB by default),
# and the whole record stays one click away (`GET /jobs/{id}`).
PAYLOAD_SHOWN_BYTES: Final = 64 * 1024
# How often a live job's status part asks for itself again.
REFRESH_SECONDS: Final = 2
# The jobs it depends on the page links to (it may depend on a thousand); the rest are
# counted, and listed by `GET /jobs/{id}`.
SHOWN_DEPENDENCIES: Final = 20


@dataclass(frozen=True, slots=True)
class JobAction:
    # Its path under the job's (`/ui/jobs/{id}/{name}`): the confirmation, then the POST.
    name: str
    label: str
    # The `?done=` the page is sent back with, and what it then says.
    done: str
    said: str
    allowed: frozenset[Status]
    # What the confirmation says will happen.
    consequence: str


ACTIONS: Final = (
    JobAction(
        name="retry",
        label="Retry",
        done="retried",
        said="Retried: the job went back to pending with a fresh budget of attempts.",
        allowed=sources(Operation.RETRY),
        consequence="It goes back to pending with a fresh budget of attempts, and runs "
        "again when a worker claims it. Its history stays.",
    ),
    JobAction(
        name="cancel",
        label="Cancel",
        done="cancelled",
        said="Cancelled: the job will not run again unless it is retried.",
        allowed=sources(Operation.CANCEL),
        consequence="A waiting or pending job never runs. A running one is stopped by its "
        "worker, and nothing its handler does from then on is recorded. It can be retried "
        "later.",
    ),
    JobAction(
        name="discard",
        label="Discard",
        done="discarded",
        said="Discarded: the job and its history are deleted.",
        allowed=DELETABLE,
        consequence="The job and its history are deleted for good: its id is not found "
        "from then on, and its unique key is free.",
    ),
)
BY_NAME: Final = {action.name: action for action in ACTIONS}
DISCARDED: Final = BY_NAME["discard"].done


def actions_for(status: Status) -> tuple[JobAction, ...]:
    """The actions a job in `status` may take, in the page's order."""
    return tuple(action for action in ACTIONS if status in action.allowed)


def done_message(done: str | None) -> str | None:
    """What the page says after an action (`?done=`); None for any other value."""
    return next((action.said for action in ACTIONS if action.done == done), None)


@dataclass(frozen=True, slots=True)
class Payload:
    """A JSON value as the page shows it: a job's payload, or its result."""

    text: str
    # Whether `text` is only the first PAYLOAD_SHOWN_BYTES of it; its whole size.
    cut: bool
    size: int

    @property
    def shown_size(self) -> str:
        return size_text(len(self.text.encode()))

    @property
    def whole_size(self) -> str:
        return size_text(self.size)


def payload_shown(payload: JsonValue, limit: int = PAYLOAD_SHOWN_BYTES) -> Payload:
    """`payload` as indented JSON, cut to `limit` bytes (never inside a character)."""
    pretty = msgspec.json.format(msgspec.json.encode(payload), indent=2)
    shown = pretty[:limit].decode("utf-8", errors="ignore")
    return Payload(text=shown, cut=len(pretty) > limit, size=len(pretty))


def size_text(size: int) -> str:
    """A size in bytes as a person reads it: "812 bytes", "64 KiB", "1.5 MiB"."""
    if size < 1024:
        return f"{size:,} byte{'' if size == 1 else 's'}"
    value, unit = (size / 1024, "KiB") if size < 1024 * 1024 else (size / 1024**2, "MiB")
    return f"{value:,.1f}".removesuffix(".0") + f" {unit}"


@dataclass(frozen=True, slots=True)
class Moment:
    # For the <time> element's `datetime`, and as a person reads it (UTC, milliseconds).
    iso: str
    text: str


def moment(value: datetime | None) -> Moment | None:
    if value is None:
        return None
    utc = value.astimezone(UTC)
    return Moment(utc.isoformat(), f"{utc:%Y-%m-%d %H:%M:%S}.{utc.microsecond // 1000:03d} UTC")


def took(elapsed: timedelta) -> str:
    """An attempt's duration as a person compares them: milliseconds under a second,
    tenths of seconds under a minute, then the two largest units."""
    seconds = max(0.0, elapsed.total_seconds())
    if seconds < 1:
        return f"{int(seconds * 1000)} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    return age(elapsed)


@dataclass(frozen=True, slots=True)
class AttemptRow:
    attempt: int
    outcome: Outcome
    error: str | None
    worker: str | None
    started: Moment | None
    ended: Moment | None
    # Empty while it runs, and for an attempt whose start was not kept.
    duration: str


def attempt_row(record: AttemptRecord) -> AttemptRow:
    spent = (
        ""
        if record.started_at is None or record.finished_at is None
        else took(record.finished_at - record.started_at)
    )
    return AttemptRow(
        attempt=record.attempt,
        outcome=record.outcome,
        error=record.error,
        worker=record.worker,
        started=moment(record.started_at),
        ended=moment(record.finished_at),
        duration=spent,
    )


@dataclass(frozen=True, slots=True)
class ProgressShown:
    """A job's last progress report, as its page lays it out."""

    # The bar's value, from 0 to 1. None without a fraction: then no bar is drawn, since
    # a <progress> without a value is the browser's "indeterminate" animation, which
    # would say the job moves when nothing says so.
    fraction: float | None
    # "40%", rounded down: "100%" only once all is done.
    percent: str | None
    # "1,204 of 3,000 done"; "1,204 done" without a total, "3,000 in all" without done.
    counts: str | None
    message: str | None
    written: Moment | None
    # How long ago it was written ("3 s"), on this process's clock against the store's:
    # a few seconds' skew between them at worst, and never below "0 s".
    written_ago: str | None
    # Said when the report is not the running attempt's own: a person watching must not
    # read an earlier attempt's 80% as this one's.
    note: str | None


def progress_shown(job: Job, now: datetime) -> ProgressShown | None:
    """`job`'s last progress report as its page shows it; None when it has none."""
    report = job.progress
    if report is None:
        return None
    at = report.at
    earlier = at is not None and job.started_at is not None and at < job.started_at
    return ProgressShown(
        fraction=report.fraction,
        percent=None if report.fraction is None else f"{percent(report.fraction)}%",
        counts=_counts(report),
        message=report.message,
        written=moment(at),
        written_ago=None if at is None else age(now - at),
        note=_note(job.status, earlier=earlier),
    )


def percent(fraction: float) -> int:
    """`fraction` in whole percent, rounded down; rounded first to a millionth, so that a
    float a hair below a whole percent (0.29 * 100 is 28.999…) reads as that percent."""
    return math.floor(round(fraction * 100, 6))


def _counts(report: Progress) -> str | None:
    if report.done is not None and report.total is not None:
        return f"{report.done:,} of {report.total:,} done"
    if report.done is not None:
        return f"{report.done:,} done"
    if report.total is not None:
        return f"{report.total:,} in all"
    return None


def _note(status: Status, *, earlier: bool) -> str | None:
    if earlier:
        running = status is Status.PROCESSING
        return "From an earlier attempt" + ("; this one has not reported yet." if running else ".")
    if status is Status.PROCESSING:
        return None
    return "The last report of its last attempt."


@dataclass(frozen=True, slots=True)
class Fact:
    # Its `data-fact` (what tests find it by), label and value: text, a moment, links to
    # other pages, or None.
    name: str
    label: str
    value: str | Moment | Links | None

    @property
    def kind(self) -> str:
        """How the template lays its value out: "none", "text", "moment" or "links"."""
        if self.value is None:
            return "none"
        if isinstance(self.value, str):
            return "text"
        return "moment" if isinstance(self.value, Moment) else "links"


@dataclass(frozen=True, slots=True)
class JobView:
    job: Job
    # Pending or running: the status part refreshes itself until the job ends.
    live: bool
    facts: tuple[Fact, ...]
    attempts: tuple[AttemptRow, ...]
    actions: tuple[JobAction, ...]
    trace_id: str | None
    progress: ProgressShown | None = None
    # Whether the page has a Result part: a completed job's, whose `result` is None when
    # its handler returned nothing.
    completed: bool = False
    result: Payload | None = None
    refresh_seconds: int = REFRESH_SECONDS


def job_view(job: Job, now: datetime | None = None) -> JobView:
    """`job`'s page; `now` (default: this process's clock) is what a progress report's
    age is counted to."""
    completed = job.status is Status.COMPLETED
    return JobView(
        job=job,
        live=TRAITS[job.status].phase is Phase.LIVE,
        facts=_facts(job),
        attempts=tuple(attempt_row(record) for record in job.history),
        actions=actions_for(job.status),
        trace_id=trace_id(job.traceparent),
        progress=progress_shown(job, datetime.now(UTC) if now is None else now),
        completed=completed,
        result=payload_shown(job.result) if completed and job.result is not None else None,
    )


def _facts(job: Job) -> tuple[Fact, ...]:
    return (
        Fact("type", "Type", job.type),
        Fact("queue", "Queue", job.queue),
        Fact("priority", "Priority", str(job.priority)),
        Fact("attempts", "Attempts", f"{job.attempts} of {job.max_attempts}"),
        Fact("run_at", "Run at", moment(job.run_at)),
        Fact("created_at", "Created", moment(job.created_at)),
        Fact("updated_at", "Updated", moment(job.updated_at)),
        Fact("started_at", "Started", moment(job.started_at)),
        Fact("worker", "Worker", job.worker),
        Fact(
            "timeout",
            "Timeout",
            "the worker's JOB_TIMEOUT" if job.timeout is None else format_duration(job.timeout),
        ),
        Fact("unique_key", "Unique key", job.unique_key),
        Fact("partition_key", "Partition key", job.partition_key),
        Fact("idempotency_key", "Idempotency key", job.idempotency_key),
        Fact("snoozes", "Snoozes", str(job.snoozes)),
        *dependency_facts(job),
    )


def dependency_facts(job: Job) -> tuple[Fact, ...]:
    """Its workflow and the jobs it depends on, linked, whether it runs anyway, and while
    it waits how many of them have not ended: none of these for a job outside any graph."""
    facts = []
    if job.workflow_id is not None:
        facts.append(Fact("workflow", "Workflow", Links((workflow_link(job.workflow_id),))))
    if job.depends_on:
        shown = links_to(job.depends_on, SHOWN_DEPENDENCIES)
        facts.append(Fact("depends_on", "Depends on", shown))
    if job.run_anyway:
        facts.append(Fact("run_anyway", "Runs anyway", "yes, whatever its dependencies' ends"))
    if job.status is Status.WAITING:
        of = len(job.depends_on or ())
        facts.append(Fact("waiting_for", "Waiting for", f"{job.waiting_for} of {of} jobs"))
    return tuple(facts)
