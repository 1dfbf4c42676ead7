"""What `jobqueue jobs …` does with the client: list, submit one job or a batch from a
file, wait for a job's end, and act on many jobs at once. The one-call commands (`show`,
`retry`, …) are a line each in `operate.py`."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from jobqueue.domain.bulk import MAX_SELECTED
from jobqueue.domain.errors import InvalidJob, NotEnded
from jobqueue.domain.status import Status
from jobqueue.domain.unique import DEFAULT_UNIQUE_STATES, Unique
from jobqueue.entrypoints.service import exit_codes

if TYPE_CHECKING:
    from uuid import UUID

    import msgspec

    from jobqueue.client import BatchItem, Client, JobRecord, SubmittedRecord

# A wait's exit statuses, beside 0 (completed), 1 (refused, unreachable) and 2 (usage):
# a script tells "it ran and failed" from "it has not run yet" without parsing output.
ENDED_OTHERWISE = 3  # failed, cancelled or dead-lettered
NOT_ENDED = 4  # still pending or processing when the wait's time ran out
INTERRUPTED = exit_codes.FORCED  # Ctrl-C, 130 as shells report it; the job goes on
# As long as `Client.wait` waits by default.
DEFAULT_WAIT = timedelta(seconds=60)


class UsageError(Exception):
    """What the command line asked for cannot be sent: options that exclude each other,
    a file that cannot be read or is not what it should hold. Exit status 2."""


class Unfinished(Exception):
    """A wait that ended without the job's end, which goes on: out of time, interrupted,
    or the service lost after a submission. The message says how to wait again, since
    the job's id may be nowhere else on screen; `status` is the exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def list_jobs(client: Client, args: argparse.Namespace) -> list[JobRecord]:
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


def submit(client: Client, args: argparse.Namespace) -> JobRecord:
    """`POST /jobs`, then with `--wait` (or `--wait-timeout`) the job's end: its record
    once it ended, as `jobs wait` prints it."""
    from jobqueue.client import ClientError

    made = _submit(client, args)
    if not args.wait and args.wait_timeout is None:
        return made
    # The job exists now: whatever stops the wait, its id must reach the person.
    try:
        return _waited(client, made.id, args.wait_timeout or DEFAULT_WAIT)
    except ClientError as error:
        message = f"{error}; job {made.id} was submitted; {_again(made.id)}"
        raise Unfinished(message, exit_codes.FAILED) from None


def wait(client: Client, args: argparse.Namespace) -> JobRecord:
    """`GET /jobs/{id}/wait` until the job ends or `--timeout` passes."""
    return _waited(client, args.job_id, args.timeout)


def _waited(client: Client, job_id: UUID | str, timeout: timedelta) -> JobRecord:
    try:
        return client.wait(job_id, timeout=timeout.total_seconds())
    except NotEnded as error:
        raise Unfinished(f"{error}; {_again(error.job_id)}", NOT_ENDED) from None
    except KeyboardInterrupt:
        message = f"interrupted: job {job_id} goes on; {_again(job_id)}"
        raise Unfinished(message, INTERRUPTED) from None


def _again(job_id: UUID | str) -> str:
    return f"waiting again is safe: jobqueue jobs wait {job_id}"


def ended_status(job: JobRecord) -> int:
    """A waited job's exit status: 0 completed, ENDED_OTHERWISE for any other end."""
    return exit_codes.OK if job.status == Status.COMPLETED else ENDED_OTHERWISE


def ending(job: JobRecord) -> str:
    """How a job that did not complete ended, in a line: its status and first line of
    error."""
    error = (job.last_error or "").strip().splitlines()
    return f"job {job.id} ended {job.status}" + (f": {error[0]}" if error else "")


def _submit(client: Client, args: argparse.Namespace) -> SubmittedRecord:
    """`POST /jobs` with the options given: each of the client's `SubmitOptions` is the
    option of the same name (`--max-attempts` is `max_attempts`), so a new one is an
    option of `jobs submit` by adding it to the parser."""
    from jobqueue.client import SubmitOptions

    if args.run_anyway and not args.depends_on:
        raise UsageError("--run-anyway: give the jobs it runs after with --after")
    names = SubmitOptions.__required_keys__ | SubmitOptions.__optional_keys__
    options = {
        name: getattr(args, name)
        for name in names
        if name != "unique" and getattr(args, name, None) is not None
    }
    unique = _unique(args)
    if unique is not None:
        options["unique"] = unique
    payload = args.payload
    if args.payload_file is not None:
        try:
            payload = json.loads(_read(args.payload_file))
        except ValueError as error:
            raise UsageError(f"--payload-file {args.payload_file}: not JSON: {error}") from None
    return client.submit(args.job_type, payload, **options)


def _unique(args: argparse.Namespace) -> Unique | None:
    given = (args.unique_key, args.unique_by, args.unique_states, args.unique_period)
    if not args.unique and all(value is None for value in given):
        return None
    try:
        return Unique(
            key=args.unique_key,
            by=args.unique_by,
            states=args.unique_states or DEFAULT_UNIQUE_STATES,
            period=args.unique_period,
        )
    except InvalidJob as error:
        raise UsageError(str(error)) from None


def submit_batch(client: Client, args: argparse.Namespace) -> list[BatchItem]:
    """`POST /jobs/batch` with the jobs of a file: a list of `POST /jobs` bodies, or the
    API's own body (`{"jobs": [...], "callback": {...}}`), checked against the API's types
    before sending. The jobs stored, in the order sent, then the callback if any."""
    import msgspec

    from jobqueue.wire.requests import BatchJob, BatchRequest

    text = _read(args.file)
    try:
        jobs = msgspec.json.decode(text, type=list[BatchJob] | BatchRequest)
    # ValidationError first: it is a DecodeError too.
    except msgspec.ValidationError as error:
        raise UsageError(f"{args.file}: not a list of jobs: {error}") from None
    except msgspec.DecodeError as error:
        raise UsageError(f"{args.file}: not JSON: {error}") from None
    if isinstance(jobs, list):
        return client.submit_batch(jobs)
    given = jobs.callback
    callback = None if given is None else BatchJob(**msgspec.structs.asdict(given))
    batch = client.submit_batch(jobs.jobs, callback=callback)
    return batch if batch.callback is None else [*batch, batch.callback]


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read {path}: {error}") from None


# --- many jobs at once -------------------------------------------------------------------

_VERBS = {"retry-many": "Retry", "discard-many": "Delete", "cancel-many": "Cancel"}


def bulk_question(args: argparse.Namespace) -> str:
    """What a bulk action is about to do, asked of a person at a terminal."""
    which = (
        f"every {args.status} job"
        if args.limit is None
        else f"at most {args.limit} {args.status} jobs"
    )
    if args.queue is not None:
        which += f" in queue {args.queue!r}"
    if args.job_type is not None:
        which += f" of type {args.job_type!r}"
    return f"{_VERBS[args.action]} {which}?"


def bulk(client: Client, args: argparse.Namespace) -> msgspec.Struct:
    """Every selected job, or `--limit` of them, a call of at most MAX_SELECTED at a time
    (the API's bound) until a call finds fewer than it asked for: jobs acted on leave the
    status selected, so each call finds the next ones. The total, as the API's record."""
    from jobqueue.wire.records import Cancelled, Discarded, Retried

    act = {
        "retry-many": client.retry_many,
        "discard-many": client.discard_many,
        "cancel-many": client.cancel_many,
    }[args.action]
    done = 0
    while True:
        asked = MAX_SELECTED if args.limit is None else min(MAX_SELECTED, args.limit - done)
        count = act(args.status, queue=args.queue, job_type=args.job_type, limit=asked)
        done += count
        if count < asked or done == args.limit:
            break
    if args.action == "retry-many":
        return Retried(retried=done)
    if args.action == "discard-many":
        return Discarded(discarded=done)
    return Cancelled(cancelled=done)
