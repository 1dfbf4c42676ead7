"""The operator's commands against a running `jobqueue serve` that requires a token: its
options anywhere on the command line, what it says when the service is out of reach, and
the API's operations (submit, batches, bulk actions, periodic jobs) as commands."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobqueue.client import Client, job_request
from tests.integration.operator_handlers import MODULE
from tests.support.operator_service import TOKEN, client, serving_with_token
from tests.support.processes import JOBQUEUE, REPO_ROOT, Service, environment
from tests.support.processes import run as run_jobqueue

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("engine")]

LATER = ("--delay", "1h")  # pending for the test's length


@pytest.fixture(scope="module")
def service(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    folder = tmp_path_factory.mktemp("operator")
    with serving_with_token(database_url, folder, handlers=MODULE, workers=1) as running:
        yield running


# A fixture of tests.support.operator_service, used by name.
__all__ = ["client"]


def run(service: Service, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """`jobqueue <args>` against `service`, found by the environment's variables."""
    return run_jobqueue(
        list(args), stdin=stdin, JOBQUEUE_URL=service.base_url, JOBQUEUE_TOKEN=TOKEN
    )


def queue() -> str:
    return f"o{uuid.uuid4().hex[:8]}"


# --- submitting ----------------------------------------------------------------------------


def test_jobs_submit_sends_every_option_and_prints_the_job(
    service: Service, client: Client
) -> None:
    name, key = queue(), f"report-{uuid.uuid4()}"
    options = ("--queue", name, "--priority", "3", "--max-attempts", "2", "--timeout", "90s")
    unique = ("--unique-key", key, "--unique-states", "pending,processing,completed")

    done = run(
        service,
        "jobs",
        "submit",
        "sleep",
        "--payload",
        '{"duration": "1s"}',
        *options,
        *unique,
        *LATER,
        "--json",
    )
    again = run(
        service,
        "jobs",
        "submit",
        "sleep",
        "--payload",
        '{"duration": "2s"}',
        *options,
        *unique,
        *LATER,
        "--json",
    )

    assert done.returncode == 0, done.stderr
    made = json.loads(done.stdout)
    assert (made["status"], made["duplicate"]) == ("pending", False)
    job = client.job(made["id"])
    assert (job.type, job.payload, job.queue, job.priority, job.max_attempts) == (
        "sleep",
        {"duration": "1s"},
        name,
        3,
        2,
    )
    assert (job.timeout, job.unique_key) == ("1m30s", key)
    assert (job.run_at - job.created_at).total_seconds() == pytest.approx(3600, abs=5)
    assert (json.loads(again.stdout)["id"], json.loads(again.stdout)["duplicate"]) == (
        made["id"],
        True,
    )


def test_jobs_submit_reads_the_payload_from_a_file_or_stdin_and_prints_a_card(
    service: Service, client: Client, tmp_path: Path
) -> None:
    payload = tmp_path / "payload.json"
    payload.write_text('{"duration": "3s"}')

    from_file = run(
        service,
        "jobs",
        "submit",
        "sleep",
        "--payload-file",
        str(payload),
        "--run-at",
        "2099-01-01T09:00:00+01:00",
        "--idempotency-key",
        "file-1",
    )
    from_stdin = run(
        service,
        "jobs",
        "submit",
        "sleep",
        "--payload-file",
        "-",
        *LATER,
        stdin='{"duration": "4s"}',
    )

    assert from_file.returncode == 0, from_file.stderr
    card = dict(line.split(None, 1) for line in from_file.stdout.splitlines() if " " in line)
    assert (card["type"], card["status"], card["run_at"]) == (
        "sleep",
        "pending",
        "2099-01-01 08:00:00",
    )
    assert client.job(card["id"]).idempotency_key == "file-1"
    assert from_stdin.returncode == 0, from_stdin.stderr
    [line] = [line for line in from_stdin.stdout.splitlines() if line.startswith("payload")]
    assert line.split(None, 1)[1] == '{"duration": "4s"}'


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (["--payload", "{"], "argument --payload: not JSON"),
        (["--run-at", "2099-01-01 09:00"], "has no offset: add Z (UTC) or one such as +01:00"),
        (["--delay", "soon"], "argument --delay: invalid duration 'soon'"),
        (["--unique-key", "k", "--unique-by", "a"], "give a key or the payload fields"),
        (["--unique-states", "completed"], "unique states must include pending, processing"),
        (["--payload-file", "/no/such/file"], "cannot read /no/such/file"),
    ],
)
def test_jobs_submit_refuses_what_it_cannot_send_as_usage(
    service: Service, words: list[str], said: str
) -> None:
    done = run(service, "jobs", "submit", "sleep", *words)

    assert done.returncode == 2
    assert said in done.stderr
    assert "Traceback" not in done.stderr


def test_jobs_submit_says_what_the_service_refused(service: Service) -> None:
    done = run(service, "jobs", "submit", "no_such_type")

    assert done.returncode == 1
    assert done.stderr.startswith("jobqueue: 400: unknown job type 'no_such_type'")


def test_jobs_submit_batch_from_a_file_or_stdin_all_or_none(
    service: Service, client: Client, tmp_path: Path
) -> None:
    name = queue()
    jobs = [
        {"type": "sleep", "payload": {"duration": f"{n}s"}, "queue": name, "delay": "1h"}
        for n in range(3)
    ]
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps(jobs))

    done = run(service, "jobs", "submit-batch", str(batch))
    piped = run(
        service, "jobs", "submit-batch", "-", "--json", stdin=json.dumps({"jobs": jobs[:1]})
    )
    refused = run(
        service,
        "jobs",
        "submit-batch",
        "-",
        stdin=json.dumps([*jobs, {"type": "no_such_type", "queue": name}]),
    )
    malformed = run(
        service, "jobs", "submit-batch", "-", stdin='[{"type": "sleep", "priority": "x"}]'
    )

    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header.split()[:3] == ["id", "type", "queue"]
    assert [row.split()[2] for row in rows] == [name] * 3
    assert piped.returncode == 0, piped.stderr
    assert [job["queue"] for job in json.loads(piped.stdout)] == [name]
    assert refused.returncode == 1
    assert "unknown job type 'no_such_type'" in refused.stderr
    assert len(list(client.iter_jobs("pending", queue=name))) == 4  # the refused batch: none
    assert malformed.returncode == 2
    assert "-: not a list of jobs: Expected `int`, got `str` - at `$[0].priority`" in (
        malformed.stderr
    )


# --- one job -------------------------------------------------------------------------------


def test_jobs_reschedule_run_now_and_delete(service: Service, client: Client) -> None:
    name = queue()
    job = client.submit("sleep", {"duration": "1s"}, queue=name, delay="1h")

    later = run(
        service, "jobs", "reschedule", str(job.id), "--run-at", "2099-01-01T00:00:00Z", "--json"
    )
    assert later.returncode == 0, later.stderr
    assert json.loads(later.stdout)["run_at"] == "2099-01-01T00:00:00Z"
    sooner = run(service, "jobs", "reschedule", str(job.id), "--delay", "2h", "--json")
    assert sooner.returncode == 0, sooner.stderr
    rescheduled = client.job(job.id)
    assert (rescheduled.run_at - rescheduled.updated_at).total_seconds() == pytest.approx(
        7200, abs=5
    )
    neither = run(service, "jobs", "reschedule", str(job.id))
    assert neither.returncode == 2
    assert "one of the arguments --run-at --delay is required" in neither.stderr

    now = run(service, "jobs", "run-now", str(job.id), "--json")
    assert now.returncode == 0, now.stderr
    due = client.job(job.id)
    assert (due.status, due.run_at <= due.updated_at) == ("pending", True)

    # In a queue no worker consumes, it stays pending: deleted, it is printed as it was.
    deleted = run(service, "jobs", "delete", str(job.id))
    assert deleted.returncode == 0, deleted.stderr
    assert [line.split() for line in deleted.stdout.splitlines()][:2] == [
        ["id", str(job.id)],
        ["type", "sleep"],
    ]
    again = run(service, "jobs", "delete", str(job.id))
    assert again.returncode == 1
    assert again.stderr.startswith("jobqueue: 404: ")


# --- many at once ----------------------------------------------------------------------------


def test_bulk_actions_mirror_the_apis_selection_and_print_the_count(
    service: Service, client: Client
) -> None:
    name, other = queue(), queue()
    for each in (name, other):
        client.submit_batch(
            [job_request("sleep", {"duration": "1s"}, queue=each, delay="1h") for _ in range(3)]
        )

    cancelled = run(
        service, "jobs", "cancel-many", "--status", "pending", "--queue", name, "--json"
    )
    retried = run(
        service,
        "jobs",
        "retry-many",
        "--status",
        "cancelled",
        "--queue",
        name,
        "--type",
        "sleep",
        "--limit",
        "2",
    )
    discarded = run(service, "jobs", "discard-many", "--status", "cancelled", "--queue", name)

    assert json.loads(cancelled.stdout) == {"cancelled": 3}, cancelled.stderr
    assert retried.stdout.split() == ["retried", "2"], retried.stderr
    assert discarded.stdout.split() == ["discarded", "1"], discarded.stderr
    assert len(list(client.iter_jobs("pending", queue=name))) == 2
    assert len(list(client.iter_jobs("pending", queue=other))) == 3  # not selected


def test_bulk_actions_go_past_one_calls_bound(service: Service, client: Client) -> None:
    name = queue()
    for _ in range(2):
        client.submit_batch(
            [job_request("sleep", {"duration": "1s"}, queue=name, delay="1h")] * 1000
        )

    some = run(
        service,
        "jobs",
        "cancel-many",
        "--status",
        "pending",
        "--queue",
        name,
        "--limit",
        "1003",
        "--json",
    )
    rest = run(service, "jobs", "cancel-many", "--status", "pending", "--queue", name, "--json")

    assert json.loads(some.stdout) == {"cancelled": 1003}, some.stderr
    assert json.loads(rest.stdout) == {"cancelled": 997}, rest.stderr


def on_a_terminal(service: Service, args: list[str], typed: str) -> tuple[int, str]:
    """`jobqueue <args>` with a terminal for its standard input, on which `typed` is typed;
    its exit status and stderr."""
    primary, secondary = os.openpty()
    try:
        process = subprocess.Popen(
            [str(JOBQUEUE), *args],
            cwd=REPO_ROOT,
            env=environment(None, JOBQUEUE_URL=service.base_url, JOBQUEUE_TOKEN=TOKEN),
            stdin=secondary,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.close(secondary)
        os.write(primary, typed.encode())
        _, err = process.communicate(timeout=120)
    finally:
        os.close(primary)
    return process.returncode, err


def test_bulk_actions_ask_a_person_at_a_terminal_first(service: Service, client: Client) -> None:
    name = queue()
    client.submit_batch(
        [job_request("sleep", {"duration": "1s"}, queue=name, delay="1h") for _ in range(2)]
    )
    cancel = ["jobs", "cancel-many", "--status", "pending", "--queue", name]

    declined = on_a_terminal(service, cancel, "n\n")
    assert declined == (
        1,
        f"Cancel every pending job in queue {name!r}? [y/N] jobqueue: nothing done\n",
    )
    assert len(list(client.iter_jobs("pending", queue=name))) == 2

    code, err = on_a_terminal(service, [*cancel, "--limit", "1"], "y\n")
    assert (code, err) == (0, f"Cancel at most 1 pending jobs in queue {name!r}? [y/N] ")
    code, err = on_a_terminal(service, [*cancel, "--yes"], "")
    assert (code, err) == (0, "")
    assert list(client.iter_jobs("pending", queue=name)) == []


# --- periodic jobs -----------------------------------------------------------------------


def test_periodic_list_shows_each_schedule(service: Service) -> None:
    table = run(service, "periodic", "list")
    listed = run(service, "periodic", "list", "--json")

    assert table.returncode == 0, table.stderr
    header, row = table.stdout.splitlines()
    assert header.split() == [
        "name",
        "type",
        "cron",
        "timezone",
        "next_run_at",
        "last_slot_at",
        "catch_up",
    ]
    assert row.split()[:7] == ["nightly_report", "nightly_report", "0", "3", "*", "*", "*"]
    assert "Europe/Paris" in row
    [each] = json.loads(listed.stdout)
    assert (each["name"], each["cron"], each["timezone"]) == (
        "nightly_report",
        "0 3 * * *",
        "Europe/Paris",
    )
