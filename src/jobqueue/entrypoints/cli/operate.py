"""`jobqueue jobs …`, `workflows …`, `queues …`, `types list`, `periodic list` and
`workers list`: an operator's look at a running service, and the actions they take on
it, through its HTTP API (`jobqueue.client`), so the same commands reach a service on
another host, token and all.

What each takes is in `operator_parsers.py`; what the jobs' commands do, `jobs_commands.py`;
how an answer is printed, `output.py`. Exit status 0, 1 when the service refused or could
not be reached, or a person said no (the reason on stderr), 2 for a bad command line;
a wait for a job's end (`jobs wait`, `jobs submit --wait`) adds its own (`jobs_commands`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from jobqueue.entrypoints.cli import jobs_commands
from jobqueue.entrypoints.cli.jobs_commands import Unfinished, UsageError
from jobqueue.entrypoints.cli.operator_parsers import (
    BULK_ACTIONS,
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_URL,
    TOKEN_VARIABLE,
    URL_VARIABLE,
)
from jobqueue.entrypoints.service import exit_codes

if TYPE_CHECKING:
    # Imported by `run` only: `jobqueue --help` and the service's own commands need
    # neither the HTTP client nor the tables.
    from jobqueue.client import Client


@dataclass(frozen=True, slots=True)
class ServiceOptions:
    """Which service, and how to print its answers: the options wherever they were given
    on the command line, else the environment's, else the defaults."""

    url: str
    token: str | None
    request_timeout: float
    json: bool

    @classmethod
    def of(cls, args: argparse.Namespace, environ: dict[str, str]) -> ServiceOptions:
        return cls(
            # An empty variable (JOBQUEUE_URL= in a shell) is no URL.
            url=getattr(args, "url", None) or environ.get(URL_VARIABLE) or DEFAULT_URL,
            token=getattr(args, "token", environ.get(TOKEN_VARIABLE)),
            request_timeout=getattr(args, "request_timeout", DEFAULT_REQUEST_TIMEOUT),
            json=getattr(args, "json", False),
        )


def run(
    args: argparse.Namespace,
    out: TextIO | None = None,
    err: TextIO | None = None,
    answers: TextIO | None = None,
) -> int:
    """Carry out the parsed command; its exit status. A bulk action asks first when
    `answers` (stdin) is a terminal, unless `--yes`."""
    from jobqueue.client import Client, ClientError
    from jobqueue.entrypoints.cli.output import write

    errors = err or sys.stderr
    options = ServiceOptions.of(args, dict(os.environ))
    if _refused(args, answers or sys.stdin, errors):
        print("jobqueue: nothing done", file=errors)
        return exit_codes.FAILED
    try:
        with Client(options.url, token=options.token, timeout=options.request_timeout) as client:
            answer = _ACTIONS[(args.command, args.action)](client, args)
    except UsageError as error:
        print(f"jobqueue {args.command} {args.action}: error: {error}", file=errors)
        return exit_codes.USAGE
    except ClientError as error:
        print(f"jobqueue: {error}", file=errors)
        return exit_codes.FAILED
    except Unfinished as error:
        print(f"jobqueue: {error}", file=errors)
        return error.status
    write(args.command, answer, out or sys.stdout, options.json)
    if not _waited(args):
        return exit_codes.OK
    status = jobs_commands.ended_status(answer)
    if status != exit_codes.OK:
        # Said on stderr too: stdout may be a file or a pipe that no person reads.
        print(f"jobqueue: {jobs_commands.ending(answer)}", file=errors)
    return status


def _waited(args: argparse.Namespace) -> bool:
    """Whether the command waited for a job's end, whose status is then the exit's."""
    return args.action == "wait" or (
        args.action == "submit" and (args.wait or args.wait_timeout is not None)
    )


def _refused(args: argparse.Namespace, answers: TextIO, errors: TextIO) -> bool:
    """Whether a person at a terminal said no to a bulk action. A script (stdin not a
    terminal) is not asked: it said what it wanted on its command line."""
    if args.action not in BULK_ACTIONS or args.yes or not answers.isatty():
        return False
    # On stderr: stdout may be a pipe to a script that reads the answer.
    errors.write(f"{jobs_commands.bulk_question(args)} [y/N] ")
    errors.flush()
    try:
        reply = answers.readline()
    except KeyboardInterrupt:
        reply = ""
    return reply.strip().lower() not in ("y", "yes")


def _set_limits(client: Client, args: argparse.Namespace) -> Any:
    given = (args.concurrency, args.rate, args.key_concurrency, args.key_rate, args.type_rate)
    if all(limit is None for limit in given):
        raise SystemExit(
            "jobqueue queues limit: give --concurrency, --rate, --key-concurrency, "
            "--key-rate, --type-rate or more than one (`jobqueue queues unlimit QUEUE` "
            "lifts every limit)"
        )
    return client.set_limits(
        args.name,
        concurrency=args.concurrency,
        rate=args.rate,
        key_concurrency=args.key_concurrency,
        key_rate=args.key_rate,
        type_rates=None if args.type_rate is None else _type_rates(args.type_rate),
    )


def _type_rates(given: list[str]) -> dict[str, str]:
    """The `--type-rate TYPE:N/PERIOD` options as the API takes them, by type. Read
    here: the API's body holds one rate per type, so a type given twice would otherwise
    lose one of its rates unsaid."""
    from jobqueue.domain.flow import parse_type_rates

    try:
        rated = parse_type_rates(given)
    except ValueError as error:
        raise UsageError(f"--type-rate: {error}") from None
    return {name: str(rate) for name, rate in rated}


def _workflow_acted(client: Client, args: argparse.Namespace) -> Any:
    """A workflow's cancel or retry, printed as the API answers it: its id and the count."""
    from uuid import UUID

    from jobqueue.wire.records import WorkflowActed

    act = client.cancel_workflow if args.action == "cancel" else client.retry_workflow
    count = act(args.workflow_id)
    # The service took the id as a UUID: so does this.
    return WorkflowActed(UUID(args.workflow_id), count)


_ACTIONS: dict[tuple[str, str], Callable[[Client, argparse.Namespace], Any]] = {
    ("jobs", "submit"): jobs_commands.submit,
    ("jobs", "submit-batch"): jobs_commands.submit_batch,
    ("jobs", "list"): jobs_commands.list_jobs,
    ("jobs", "show"): lambda client, args: client.job(args.job_id),
    ("jobs", "wait"): jobs_commands.wait,
    ("jobs", "retry"): lambda client, args: client.retry(args.job_id),
    ("jobs", "cancel"): lambda client, args: client.cancel(args.job_id),
    ("jobs", "run-now"): lambda client, args: client.run_now(args.job_id),
    ("jobs", "reschedule"): lambda client, args: client.reschedule(
        args.job_id, run_at=args.run_at, delay=args.delay
    ),
    ("jobs", "delete"): lambda client, args: client.delete(args.job_id),
    **{("jobs", action): jobs_commands.bulk for action in BULK_ACTIONS},
    ("workflows", "show"): lambda client, args: client.workflow(args.workflow_id),
    ("workflows", "cancel"): _workflow_acted,
    ("workflows", "retry"): _workflow_acted,
    ("queues", "list"): lambda client, args: client.queues(),
    ("queues", "pause"): lambda client, args: client.pause(args.name),
    ("queues", "resume"): lambda client, args: client.resume(args.name),
    ("queues", "limit"): lambda client, args: _set_limits(client, args),
    ("queues", "unlimit"): lambda client, args: client.lift_limits(args.name),
    ("types", "list"): lambda client, args: client.types(),
    ("periodic", "list"): lambda client, args: client.periodic(),
    ("workers", "list"): lambda client, args: client.workers(),
}
