"""How the operator's commands print an answer: a table or a card for people (rich, which
the benchmark report uses too), times in UTC to the second; `--json`, for scripts, prints
the records exactly as the API sends them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from uuid import UUID

    from rich.table import Table

    from jobqueue.client import (
        JobRecord,
        JobTypeView,
        PeriodicView,
        QueueRecord,
        WorkerView,
        WorkflowRecord,
    )
    from jobqueue.wire.queue_records import QueueLimitsView
    from jobqueue.wire.records import ProgressView

# How much of an error a table cell shows; `show` and --json give it whole. A workflow's
# table shows more: a dependent's error names the job it depended on, then how it ended.
_ERROR_WIDTH = 60
_WORKFLOW_ERROR_WIDTH = 80
# The jobs a job card lists of those it depends on (up to a thousand): --json has them all.
_DEPENDENCIES_SHOWN = 10
# A job card's fields that say nothing unless set: those of a job that depends on others.
_UNLESS_SET = {"depends_on": None, "run_anyway": False, "workflow_id": None, "waiting_for": 0}
# A payload or result on one line up to this many characters; longer, indented, at most
# _JSON_LINES lines of at most _JSON_WIDTH characters: a result may be a megabyte, which
# would bury the rest of the card. --json gives it whole.
_JSON_ONE_LINE = 100
_JSON_LINES = 20
_JSON_WIDTH = 200


def write(command: str, answer: Any, stream: Any, as_json: bool) -> None:
    """`command`'s answer (a record, or a list of them) on `stream`, as JSON or as a
    table."""
    import msgspec
    from rich.console import Console

    if as_json:
        stream.write(msgspec.json.encode(answer).decode() + "\n")
        return
    # A terminal's width, or, piped into grep or a file, lines as long as their content.
    console = Console(file=stream, width=None if stream.isatty() else 1000)
    with console.capture() as captured:
        console.print(_rendered(command, answer))
    # Without the padding of a table's last column, which a script would have to strip.
    lines = captured.get().splitlines()
    stream.write("".join(line.rstrip() + "\n" for line in lines))


def _rendered(command: str, answer: Any) -> Any:
    from jobqueue.client import JobRecord, WorkflowRecord

    if isinstance(answer, list):
        # By the command, not the first row: an empty list still has its own header.
        return _TABLES[command](answer)
    if isinstance(answer, JobRecord):
        return _job_card(answer)
    if isinstance(answer, WorkflowRecord):
        return _workflow_view(answer)
    # A queue's state after a pause or resume; a bulk action's count.
    return _card({name: getattr(answer, name) for name in answer.__struct_fields__})


def _job_table(jobs: Sequence[JobRecord]) -> Table:
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("id", "type", "queue", "pri", "status", "tries", "run_at", "last_error"):
        table.add_column(column, no_wrap=column != "last_error")
    for job in jobs:
        table.add_row(
            str(job.id),
            job.type,
            job.queue,
            str(job.priority),
            job.status.value,
            f"{job.attempts}/{job.max_attempts}",
            _when(job.run_at),
            _cut(job.last_error or ""),
        )
    return table


def _job_card(job: JobRecord) -> Table:
    import msgspec
    from rich.table import Table

    fields = msgspec.structs.asdict(job)
    history = fields.pop("history")
    for name, unset in _UNLESS_SET.items():
        if fields[name] == unset:
            del fields[name]
    if job.depends_on:
        fields["depends_on"] = _ids_text(job.depends_on)
    fields["payload"] = json_text(job.payload)
    # A result is JSON that may be null itself; a job without one (not completed, or a
    # handler that returned None) shows nothing, as for any other empty field.
    fields["result"] = "" if job.result is None else json_text(job.result)
    progress = job.progress
    fields["progress"] = "" if progress is None else progress_text(progress, job.started_at)
    card = _card(fields)
    if history:
        attempts = Table(
            box=None, header_style="bold", pad_edge=False, title="attempts", title_justify="left"
        )
        for column in ("attempt", "outcome", "started_at", "finished_at", "worker", "error"):
            attempts.add_column(column)
        for each in history:
            attempts.add_row(
                str(each.attempt),
                each.outcome,
                _when(each.started_at),
                _when(each.finished_at),
                each.worker or "",
                each.error or "",
            )
        card.add_row("", "")
        card.add_row("history", attempts)
    return card


def _ids_text(ids: Sequence[UUID]) -> str:
    """Ids a line each, the first `_DEPENDENCIES_SHOWN` of them, saying how many more."""
    lines = [str(each) for each in ids[:_DEPENDENCIES_SHOWN]]
    if len(ids) > _DEPENDENCIES_SHOWN:
        lines.append(f"… and {len(ids) - _DEPENDENCIES_SHOWN:,} more (--json shows them all)")
    return "\n".join(lines)


def _workflow_view(workflow: WorkflowRecord) -> Any:
    """A workflow's jobs, a row each in the order submitted, then a line of its counts."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("id", "type", "status", "waiting_for", "last_error"):
        table.add_column(column, no_wrap=column != "last_error")
    for job in workflow.jobs:
        table.add_row(
            str(job.id),
            job.type,
            job.status.value,
            str(job.waiting_for) if job.waiting_for else "",
            _cut(job.last_error or "", _WORKFLOW_ERROR_WIDTH),
        )
    counts = ", ".join(f"{count} {status}" for status, count in workflow.counts.items())
    jobs = f"{len(workflow.jobs)} job" + ("" if len(workflow.jobs) == 1 else "s")
    ended = "ended" if workflow.ended else "not ended"
    return Group(table, Text(""), Text(f"workflow {workflow.id}: {jobs} ({counts}), {ended}"))


def _queue_table(queues: Sequence[QueueRecord]) -> Table:
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    statuses = sorted({status for queue in queues for status in queue.jobs})
    left = ("queue", "paused", "limits", "")
    columns = (
        "queue", "paused", *statuses, "due", "scheduled", "oldest due", "consumers", "limits", ""
    )  # fmt: skip
    for column in columns:
        table.add_column(column, justify="left" if column in left else "right")
    for queue in queues:
        age = queue.oldest_due_age_seconds
        table.add_row(
            queue.name,
            "paused" if queue.paused else "",
            *(str(queue.jobs.get(status, 0)) for status in statuses),
            str(queue.due),
            str(queue.scheduled),
            "" if age is None else f"{age:.1f}s",
            str(queue.consumers),
            limits_text(queue.limits),
            # Due jobs that no live worker process will claim: say so where it is seen.
            "no consumer: due jobs wait" if queue.unconsumed else "",
        )
    return table


def _type_table(types: Sequence[JobTypeView]) -> Table:
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    columns = ("type", "source", "queue", "pri", "attempts", "unique", "published", "description")
    for column in columns:
        table.add_column(column)
    for each in types:
        unique = each.unique
        table.add_row(
            each.name,
            each.source,
            each.queue,
            str(each.priority),
            _shown(each.max_attempts),
            "" if unique is None else _shown(unique.key or unique.by or "payload"),
            "" if each.published_at is None else f"{_when(each.published_at)} {each.published_by}",
            _cut(each.description or ""),
        )
    return table


def _periodic_table(periodic: Sequence[PeriodicView]) -> Table:
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("name", "type", "cron", "timezone", "next_run_at", "last_slot_at", "catch_up"):
        table.add_column(column, no_wrap=True)
    for each in periodic:
        table.add_row(
            each.name,
            each.type,
            each.cron,
            each.timezone,
            _when(each.next_run_at),
            _when(each.last_slot_at),
            "yes" if each.catch_up else "",
        )
    return table


def _worker_table(workers: Sequence[WorkerView]) -> Table:
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("host", "pid", "version", "queues", "running", "started", "heartbeat"):
        table.add_column(column, no_wrap=column != "queues")
    for each in workers:
        table.add_row(
            each.host,
            str(each.pid),
            each.version,
            _queues_of(each),
            f"{each.running}/{each.concurrency}",
            _when(each.started_at),
            _when(each.last_heartbeat_at),
        )
    return table


def _queues_of(worker: WorkerView) -> str:
    """Its queues as QUEUES spells them (`default=10,emails=2`), where it said each one's
    share."""
    shares = worker.queue_concurrency
    if not isinstance(shares, dict):
        return ",".join(worker.queues)
    return ",".join(f"{queue}={shares[queue]}" for queue in worker.queues)


_TABLES: dict[str, Callable[[Any], Table]] = {
    "jobs": _job_table,
    "queues": _queue_table,
    "types": _type_table,
    "periodic": _periodic_table,
    "workers": _worker_table,
}


def _card(fields: dict[str, Any]) -> Table:
    from rich.table import Table

    card = Table(box=None, show_header=False, pad_edge=False)
    card.add_column(style="bold")
    card.add_column()
    for name, value in fields.items():
        card.add_row(name, _shown(value))
    return card


def limits_text(limits: QueueLimitsView) -> str:
    """A queue's limits with their use: "3 of 5 running, 40 of 100/m started"."""
    from jobqueue.domain.flow import limits_in_use

    started = limits.type_started or {}
    return limits_in_use(
        limits.concurrency,
        limits.running,
        limits.rate,
        limits.started,
        limits.key_concurrency,
        limits.key_rate,
        [(name, rate, started.get(name)) for name, rate in (limits.type_rates or {}).items()],
        declared=limits.set_by == "settings",
    )


def _shown(value: Any) -> str:
    from jobqueue.wire.queue_records import QueueLimitsView

    if value is None:
        return ""
    if isinstance(value, QueueLimitsView):
        return limits_text(value) or "none"
    if isinstance(value, datetime):
        return _when(value)
    if isinstance(value, dict | list):
        return json.dumps(value, default=str)
    return str(value)


def json_text(value: Any) -> str:
    """A JSON value for people: on one line when it fits, else indented, keeping on one
    line what fits on one; cut after `_JSON_LINES` lines, saying how long it was."""
    lines = _json_lines(value, 0, 0)
    cut = [line if len(line) <= _JSON_WIDTH else line[: _JSON_WIDTH - 1] + "…" for line in lines]
    if len(lines) > _JSON_LINES or cut != lines:
        size = len(json.dumps(value, ensure_ascii=False).encode())
        cut = [*cut[:_JSON_LINES], f"… ({size:,} bytes of JSON in all: --json shows it whole)"]
    return "\n".join(cut)


def _json_lines(value: Any, indent: int, column: int) -> list[str]:
    """`value` as lines indented from `indent`, the indentation of the line it starts on
    (at `column`), which is left out: the caller adds it."""
    flat = json.dumps(value, ensure_ascii=False)
    if column + len(flat) <= _JSON_ONE_LINE or not isinstance(value, dict | list) or not value:
        return [flat]
    if isinstance(value, list) and not any(isinstance(item, dict | list) for item in value):
        # Numbers or words, as many to a line as fit, rather than a line each.
        items: list[list[str]] = [[]]
        for item in (json.dumps(each, ensure_ascii=False) for each in value):
            line = ", ".join([*items[-1], item])
            if items[-1] and indent + 2 + len(line) + 1 > _JSON_ONE_LINE:
                items.append([])
            items[-1].append(item)
        items = [[", ".join(line)] for line in items]
    elif isinstance(value, list):
        items = [_json_lines(item, indent + 2, indent + 2) for item in value]
    else:
        items = []
        for key, item in value.items():
            named = json.dumps(key, ensure_ascii=False) + ": "
            lines = _json_lines(item, indent + 2, indent + 2 + len(named))
            items.append([named + lines[0], *lines[1:]])
    body = []
    for number, lines in enumerate(items, start=1):
        body += [f"  {line}" for line in lines]
        if number < len(items):
            body[-1] += ","
    opening, closing = ("{", "}") if isinstance(value, dict) else ("[", "]")
    return [opening, *body, closing]


def progress_text(progress: ProgressView, started_at: datetime | None = None) -> str:
    """A handler's last report: "40% (400 of 1,000): importing rows, at 2026-…"; said to
    be an earlier attempt's when written before the latest attempt (`started_at`) began,
    so that its 80 % is not read as the running attempt's (as the dashboard says)."""
    said = []
    if progress.fraction is not None:
        # Rounded down, as the dashboard does: 99.6 % done is not done. Rounded first to
        # a millionth, so that 0.29 (28.999… once times 100) reads as 29 %.
        said.append(f"{math.floor(round(progress.fraction * 100, 6))}%")
    if progress.done is not None and progress.total is not None:
        said.append(f"({progress.done:,} of {progress.total:,})")
    elif progress.done is not None:
        said.append(f"({progress.done:,} done)")
    elif progress.total is not None:
        said.append(f"(of {progress.total:,})")
    text = " ".join(said)
    if progress.message is not None:
        text = f"{text}: {progress.message}" if text else progress.message
    if progress.at is None:
        return text
    text = f"{text}, at {_when(progress.at)}"
    if started_at is not None and progress.at < started_at:
        text += " (an earlier attempt's)"
    return text


def _when(moment: datetime | None) -> str:
    return "" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _cut(text: str, width: int = _ERROR_WIDTH) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= width else line[: width - 1] + "…"
