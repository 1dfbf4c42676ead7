"""`jobqueue jobs …`, `jobqueue queues …` and `jobqueue types list`: an operator's look
at a running service, and the actions they take on it, through its HTTP API
(`jobqueue.client`), so the same commands reach a service on another host, token and all.

Tables for people (rich, which the benchmark report uses too), `--json` for scripts: the
records exactly as the API sends them. Exit status 0, 1 when the service refused or could
not be reached (the reason on stderr), 2 for a bad command line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from jobqueue.domain.status import Status
from jobqueue.entrypoints.service import exit_codes

if TYPE_CHECKING:
    # Imported by `run` only: `jobqueue --help` and the service's own commands need
    # neither the HTTP client nor the tables.
    from rich.table import Table

    from jobqueue.client import Client, JobRecord, JobTypeView, QueueRecord

DEFAULT_URL = "http://127.0.0.1:8080"
URL_VARIABLE = "JOBQUEUE_URL"
TOKEN_VARIABLE = "JOBQUEUE_TOKEN"
OPERATOR_COMMANDS = ("jobs", "queues", "types")
# How much of an error a table cell shows; `show` and --json give it whole.
_ERROR_WIDTH = 60


def add_commands(commands: Any, epilog: str) -> None:
    """The `jobs`, `queues` and `types` commands, on the `jobqueue` parser's subparsers."""
    service = argparse.ArgumentParser(add_help=False)
    service.add_argument(
        "--url",
        default=os.environ.get(URL_VARIABLE, DEFAULT_URL),
        help=f"the service's API (default: ${URL_VARIABLE}, else {DEFAULT_URL})",
    )
    service.add_argument(
        "--token",
        default=os.environ.get(TOKEN_VARIABLE),
        help=f"one of its API_TOKENS (default: ${TOKEN_VARIABLE})",
    )
    service.add_argument(
        "--json", action="store_true", help="print the API's records as JSON, for scripts"
    )
    made = {"formatter_class": argparse.RawDescriptionHelpFormatter, "epilog": epilog}

    jobs = commands.add_parser(
        "jobs", help="list, show, retry and cancel jobs of a running service", **made
    )
    actions = jobs.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser(
        "list", help="jobs of one status, oldest or soonest first", parents=[service], **made
    )
    listing.add_argument(
        "--status", required=True, choices=[status.value for status in Status], help="required"
    )
    listing.add_argument("--type", dest="job_type", help="only jobs of this type")
    listing.add_argument("--queue", help="only jobs of this queue")
    listing.add_argument(
        "--limit", type=int, default=50, help="at most this many (default 50; 0: all of them)"
    )
    for action, summary in (
        ("show", "one job's whole record, with its attempts"),
        ("retry", "requeue a failed, dead-lettered or cancelled job with a fresh budget"),
        ("cancel", "cancel a pending or running job"),
    ):
        one = actions.add_parser(action, help=summary, parents=[service], **made)
        one.add_argument("job_id", metavar="JOB_ID")

    queues = commands.add_parser("queues", help="list, pause and resume queues", **made)
    actions = queues.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser(
        "list", help="every queue: counts, oldest due job, paused", parents=[service], **made
    )
    for action, summary in (
        ("pause", "claim nothing more from a queue (running jobs finish)"),
        ("resume", "claim from a paused queue again"),
    ):
        one = actions.add_parser(action, help=summary, parents=[service], **made)
        one.add_argument("name", metavar="QUEUE")

    types = commands.add_parser("types", help="list the job types the API accepts", **made)
    actions = types.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser(
        "list",
        help="every job type: where the API knows it from, its defaults (--json: its "
        "payload schema too)",
        parents=[service],
        **made,
    )


def run(args: argparse.Namespace, out: Any = None, err: Any = None) -> int:
    """Carry out the parsed `jobs`/`queues`/`types` command; its exit status."""
    import msgspec
    from rich.console import Console

    from jobqueue.client import Client, ClientError

    stream = out or sys.stdout
    # A terminal's width, or, piped into grep or a file, lines as long as their content.
    console = Console(file=stream, width=None if stream.isatty() else 1000)
    try:
        with Client(args.url, token=args.token) as client:
            answer = _ACTIONS[(args.command, args.action)](client, args)
    except ClientError as error:
        print(f"jobqueue: {error}", file=err or sys.stderr)
        return exit_codes.FAILED
    if args.json:
        console.file.write(msgspec.json.encode(answer).decode() + "\n")
    else:
        with console.capture() as captured:
            console.print(_rendered(answer))
        # Without the padding of a table's last column, which a script would have to strip.
        lines = captured.get().splitlines()
        console.file.write("".join(line.rstrip() + "\n" for line in lines))
    return exit_codes.OK


def _list_jobs(client: Client, args: argparse.Namespace) -> list[JobRecord]:
    found = []
    for job in client.iter_jobs(
        args.status,
        job_type=args.job_type,
        queue=args.queue,
        page_size=min(args.limit, 500) if args.limit > 0 else 500,
    ):
        found.append(job)
        if len(found) == args.limit:
            break
    return found


_ACTIONS: dict[tuple[str, str], Callable[[Client, argparse.Namespace], Any]] = {
    ("jobs", "list"): _list_jobs,
    ("jobs", "show"): lambda client, args: client.job(args.job_id),
    ("jobs", "retry"): lambda client, args: client.retry(args.job_id),
    ("jobs", "cancel"): lambda client, args: client.cancel(args.job_id),
    ("queues", "list"): lambda client, args: client.queues(),
    ("queues", "pause"): lambda client, args: client.pause(args.name),
    ("queues", "resume"): lambda client, args: client.resume(args.name),
    ("types", "list"): lambda client, args: client.types(),
}


# --- tables --------------------------------------------------------------------------------


def _rendered(answer: Any) -> Any:
    from jobqueue.client import JobRecord, JobTypeView, QueueRecord

    if isinstance(answer, list):
        if answer and isinstance(answer[0], QueueRecord):
            return _queue_table(answer)
        if answer and isinstance(answer[0], JobTypeView):
            return _type_table(answer)
        return _job_table(answer)
    if isinstance(answer, JobRecord):
        return _job_card(answer)
    # A queue's state after a pause or resume.
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


def _queue_table(queues: Sequence[QueueRecord]) -> Table:
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    statuses = sorted({status for queue in queues for status in queue.jobs})
    for column in ("queue", "paused", *statuses, "due", "scheduled", "oldest due"):
        table.add_column(column, justify="left" if column in ("queue", "paused") else "right")
    for queue in queues:
        age = queue.oldest_due_age_seconds
        table.add_row(
            queue.name,
            "paused" if queue.paused else "",
            *(str(queue.jobs.get(status, 0)) for status in statuses),
            str(queue.due),
            str(queue.scheduled),
            "" if age is None else f"{age:.1f}s",
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


def _card(fields: dict[str, Any]) -> Table:
    from rich.table import Table

    card = Table(box=None, show_header=False, pad_edge=False)
    card.add_column(style="bold")
    card.add_column()
    for name, value in fields.items():
        card.add_row(name, _shown(value))
    return card


def _shown(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return _when(value)
    if isinstance(value, dict | list):
        return json.dumps(value, default=str)
    return str(value)


def _when(moment: datetime | None) -> str:
    return "" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _cut(text: str) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= _ERROR_WIDTH else line[: _ERROR_WIDTH - 1] + "…"
