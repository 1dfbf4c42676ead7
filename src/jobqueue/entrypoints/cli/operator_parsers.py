"""What the operator's commands take on the command line: `jobqueue jobs|workflows|queues|
types|periodic|workers …`, each an operation of the HTTP API, and the options that say which service
(`--url`, `--token`, `--request-timeout`) and how to print (`--json`).

Those options are accepted before the command, between its words and after them
(`jobqueue --url U jobs list`, `jobqueue jobs list --url U`): every level of the command
line declares them with `default=SUPPRESS`, so a level where one is left out never resets
it, and the last given wins. What they are when left out is decided when the command runs
(`service_options`), from the environment of that moment.
"""

from __future__ import annotations

import argparse
from typing import Any

from jobqueue.domain.bulk import ACTIONABLE, CANCELLABLE, MAX_SELECTED
from jobqueue.domain.durations import format_duration
from jobqueue.domain.status import Status
from jobqueue.entrypoints.cli import values
from jobqueue.entrypoints.cli.jobs_commands import (
    DEFAULT_WAIT,
    ENDED_OTHERWISE,
    INTERRUPTED,
    NOT_ENDED,
)

DEFAULT_URL = "http://127.0.0.1:8080"
URL_VARIABLE = "JOBQUEUE_URL"
TOKEN_VARIABLE = "JOBQUEUE_TOKEN"
DEFAULT_REQUEST_TIMEOUT = 10.0
OPERATOR_COMMANDS = ("jobs", "workflows", "queues", "types", "periodic", "workers")
# The bulk actions, with the statuses each may select (the API's own rule).
BULK_ACTIONS: dict[str, frozenset[Status]] = {
    "retry-many": ACTIONABLE,
    "discard-many": ACTIONABLE,
    "cancel-many": CANCELLABLE,
}


def add_service_options(
    parser: argparse.ArgumentParser,
    title: str = "which service, how to print (here, or anywhere on the command line)",
) -> None:
    """`--url`, `--token`, `--request-timeout` and `--json` on `parser`, under `title` in
    its help; absent from the parsed arguments unless given."""
    group = parser.add_argument_group(title)
    group.add_argument(
        "--url",
        default=argparse.SUPPRESS,
        help=f"the service's API (default: ${URL_VARIABLE}, else {DEFAULT_URL})",
    )
    group.add_argument(
        "--token",
        default=argparse.SUPPRESS,
        help=f"one of its API_TOKENS (default: ${TOKEN_VARIABLE})",
    )
    group.add_argument(
        "--request-timeout",
        type=values.seconds,
        default=argparse.SUPPRESS,
        metavar="SECONDS",
        help=f"how long to wait for each answer (default {DEFAULT_REQUEST_TIMEOUT:g})",
    )
    group.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print the API's records as JSON, for scripts",
    )


_WAIT_EXIT_CODES = f"""\
exit status of a wait (jobs wait, jobs submit --wait):
  0    the job completed; its record is on stdout
  {ENDED_OTHERWISE}    it ended otherwise (failed, cancelled or dead_letter); its record is on
       stdout, how it ended on stderr
  {NOT_ENDED}    the timeout passed first: stderr says its status (waiting, pending or processing);
       the job goes on, and waiting again is safe
  {INTERRUPTED}  interrupted (Ctrl-C); the job goes on
  1, 2 as for every command (below)"""


# The names `add_service_options` gives what it parses.
SERVICE_OPTIONS = ("url", "token", "request_timeout", "json")


def add_commands(commands: Any, epilog: str) -> None:
    """The operator's commands, on the `jobqueue` parser's subparsers."""
    made = {"formatter_class": argparse.RawDescriptionHelpFormatter, "epilog": epilog}

    def command(name: str, summary: str) -> Any:
        parser = commands.add_parser(name, help=summary, **made)
        add_service_options(parser)
        return parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(
        actions: Any, name: str, summary: str, waits: bool = False
    ) -> argparse.ArgumentParser:
        # A command that waits for a job's end has exit statuses of its own: listed first.
        shown = {**made, "epilog": f"{_WAIT_EXIT_CODES}\n\n{epilog}"} if waits else made
        parser: argparse.ArgumentParser = actions.add_parser(name, help=summary, **shown)
        add_service_options(parser)
        return parser

    jobs = command(
        "jobs", "submit, wait for, list, show, retry, cancel, reschedule and delete jobs"
    )
    _add_submit(
        action(jobs, "submit", "submit one job; prints it (with --wait, once it ended)", True)
    )
    batch = action(jobs, "submit-batch", "submit a batch of jobs from a file: all or none")
    batch.add_argument(
        "file",
        metavar="FILE",
        help="a JSON list of jobs, each a POST /jobs body (type, payload, options) with its "
        "own idempotency_key if wanted; '-' reads standard input",
    )
    listing = action(jobs, "list", "jobs of one status, oldest or soonest first")
    listing.add_argument(
        "--status", required=True, choices=[status.value for status in Status], help="required"
    )
    listing.add_argument("--type", dest="job_type", help="only jobs of this type")
    listing.add_argument("--queue", help="only jobs of this queue")
    listing.add_argument(
        "--limit", type=int, default=50, help="at most this many (default 50; 0: all of them)"
    )
    for name, summary in (
        ("show", "one job's whole record, with its attempts"),
        ("retry", "requeue a failed, dead-lettered or cancelled job with a fresh budget"),
        ("cancel", "cancel a pending or running job"),
        ("run-now", "make a pending job (scheduled, or waiting out a backoff) due at once"),
        ("delete", "delete a job that is not running; prints it as it was"),
    ):
        action(jobs, name, summary).add_argument("job_id", metavar="JOB_ID")
    waiting = action(
        jobs, "wait", "wait for a job's end; prints it as show does (exit status below)", True
    )
    waiting.add_argument("job_id", metavar="JOB_ID")
    waiting.add_argument(
        "--timeout",
        type=values.duration,
        default=DEFAULT_WAIT,
        metavar="DURATION",
        help=f"give up after this long (default {format_duration(DEFAULT_WAIT)}; 0s: "
        "answer at once)",
    )
    reschedule = action(jobs, "reschedule", "make a pending job due at another time")
    reschedule.add_argument("job_id", metavar="JOB_ID")
    _add_when(reschedule.add_mutually_exclusive_group(required=True), "due")
    for name, summary in (
        ("retry-many", "requeue every failed, dead-lettered or cancelled job selected"),
        ("discard-many", "delete every failed, dead-lettered or cancelled job selected"),
        ("cancel-many", "cancel every pending or running job selected"),
    ):
        _add_selection(action(jobs, name, summary), BULK_ACTIONS[name])

    workflows = command(
        "workflows", "show, cancel and retry workflows: jobs submitted to wait for each other"
    )
    for name, summary in (
        (
            "show",
            "a workflow's jobs in the order submitted (status, dependencies not ended, "
            "error) and how many are in each status",
        ),
        ("cancel", "cancel every job of a workflow that has not ended; prints how many"),
        (
            "retry",
            "retry a workflow's failed, dead-lettered and cancelled jobs, each waiting again "
            "for its dependencies retried with it; prints how many",
        ),
    ):
        action(workflows, name, summary).add_argument("workflow_id", metavar="WORKFLOW_ID")

    queues = command("queues", "list, pause, resume and limit queues")
    action(queues, "list", "every queue: counts, oldest due job, paused, limits and their use")
    for name, summary in (
        ("pause", "claim nothing more from a queue (running jobs finish)"),
        ("resume", "claim from a paused queue again"),
        ("unlimit", "lift every limit of a queue"),
    ):
        action(queues, name, summary).add_argument("name", metavar="QUEUE")
    limit = action(
        queues,
        "limit",
        "set a queue's limits across every process, replacing those it had (a limit not "
        "given is lifted)",
    )
    limit.add_argument("name", metavar="QUEUE")
    limit.add_argument(
        "--concurrency", type=int, metavar="N", help="at most N of its jobs running at once"
    )
    limit.add_argument(
        "--rate", metavar="N/PERIOD", help="at most N starts within any PERIOD: 100/1m, 20/s"
    )
    limit.add_argument(
        "--key-concurrency",
        type=int,
        metavar="K",
        help="at most K running at once per partition key, claims rotating between keys",
    )
    limit.add_argument(
        "--key-rate",
        metavar="N/PERIOD",
        help="at most N starts of one partition key within any PERIOD: 10/1m, 2/s",
    )
    limit.add_argument(
        "--type-rate",
        action="append",
        metavar="TYPE:N/PERIOD",
        help="at most N starts of job type TYPE within any PERIOD: send_sms:10/s; once "
        "per type (not with the per-key limits)",
    )

    types = command("types", "list the job types the API accepts")
    action(
        types,
        "list",
        "every job type: where the API knows it from, its defaults (--json: its payload "
        "schema too)",
    )
    periodic = command("periodic", "list the periodic (cron) jobs the service schedules")
    action(periodic, "list", "every periodic job: its schedule, next and last slot")
    workers = command("workers", "list the worker processes alive now")
    action(
        workers,
        "list",
        "every live worker process: host, pid, version, queues, running of concurrency, "
        "last heartbeat",
    )


def _add_submit(parser: argparse.ArgumentParser) -> None:
    """`POST /jobs`'s fields as options; each left out is left to the type, then to the
    service, as the API does."""
    parser.add_argument("job_type", metavar="TYPE", help="a job type the API accepts")
    payload = parser.add_mutually_exclusive_group()
    payload.add_argument(
        "--payload", type=values.json_value, help="the payload, as JSON (default {})"
    )
    payload.add_argument(
        "--payload-file", metavar="FILE", help="read the payload (JSON) from FILE; '-': stdin"
    )
    parser.add_argument("--queue", help="the queue it waits in (default: the type's)")
    parser.add_argument("--priority", type=int, help="0 is the most urgent (default: the type's)")
    parser.add_argument(
        "--max-attempts", type=int, help="attempts before it is dead-lettered (default: the type's)"
    )
    _add_when(parser.add_mutually_exclusive_group(), "not before")
    parser.add_argument(
        "--timeout",
        type=values.duration,
        metavar="DURATION",
        help="how long one attempt may run (default: the type's, else JOB_TIMEOUT)",
    )
    parser.add_argument(
        "--partition-key",
        metavar="KEY",
        help="the share of its queue it belongs to, as a tenant (default: the type's "
        "partition_by fields, else none)",
    )
    after = parser.add_argument_group(
        "dependencies",
        "wait for stored jobs: the job is waiting until each of them completed, and is "
        "cancelled when one ends otherwise",
    )
    after.add_argument(
        "--after",
        dest="depends_on",
        action="append",
        metavar="JOB_ID",
        help="start once this job completed; repeat for more",
    )
    after.add_argument(
        "--run-anyway",
        action="store_true",
        default=None,
        help="start once every --after job ended, however it ended, rather than be cancelled",
    )
    unique = parser.add_argument_group(
        "unique jobs", "at most one job per key; a duplicate is answered with the job holding it"
    )
    unique.add_argument(
        "--unique", action="store_true", help="unique by type and payload (the whole payload)"
    )
    unique.add_argument("--unique-key", metavar="KEY", help="unique by this key")
    unique.add_argument(
        "--unique-by",
        type=values.names,
        metavar="FIELD[,FIELD…]",
        help="unique by type and these payload fields",
    )
    unique.add_argument(
        "--unique-states",
        type=values.statuses,
        metavar="STATUS[,STATUS…]",
        help="the statuses the key counts in (default: pending,processing)",
    )
    unique.add_argument(
        "--unique-period",
        type=values.duration,
        metavar="DURATION",
        help="one job per key per period",
    )
    parser.add_argument(
        "--idempotency-key",
        metavar="KEY",
        help="submitting again with the same KEY replays the first job",
    )
    # Not `--timeout`, which is already the attempt's limit above.
    waiting = parser.add_argument_group(
        "waiting", "print the job once it ended instead, exiting as `jobs wait` does"
    )
    waiting.add_argument("--wait", action="store_true", help="wait for the job's end")
    waiting.add_argument(
        "--wait-timeout",
        type=values.duration,
        metavar="DURATION",
        help=f"give up waiting after this long (default {format_duration(DEFAULT_WAIT)}; "
        "implies --wait)",
    )


def _add_when(group: argparse._MutuallyExclusiveGroup, said: str) -> None:
    """`--run-at` or `--delay`, as a submission and a reschedule take them."""
    group.add_argument(
        "--run-at",
        type=values.instant,
        metavar="TIME",
        help=f"{said} this instant, with its offset: 2026-12-01T09:00:00Z",
    )
    group.add_argument(
        "--delay", type=values.duration, metavar="DURATION", help=f"{said} this long from now: 90s"
    )


def _add_selection(parser: argparse.ArgumentParser, statuses: frozenset[Status]) -> None:
    """`POST /jobs/retry|discard|cancel`'s selection; `--limit` may exceed one call's."""
    parser.add_argument(
        "--status", required=True, choices=sorted(status.value for status in statuses)
    )
    parser.add_argument("--queue", help="only jobs of this queue")
    parser.add_argument("--type", dest="job_type", help="only jobs of this type")
    parser.add_argument(
        "--limit",
        type=values.positive,
        help=f"at most this many, the oldest first (default: all of them, {MAX_SELECTED} a call)",
    )
    parser.add_argument(
        "-y", "--yes", action="store_true", help="do not ask first (on a terminal it asks)"
    )
