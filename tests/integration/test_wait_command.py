"""`jobqueue jobs wait`, `jobs submit --wait` and what `jobs show` says of a job's result
and progress, against a running `jobqueue serve` with handlers whose jobs end in known
ways: the record printed, and an exit status per way a wait ends."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.client import Client, SubmitOptions
from tests.integration.wait_handlers import MODULE
from tests.support.operator_service import TOKEN, client, serving_with_token
from tests.support.processes import JOBQUEUE, REPO_ROOT, Service, environment
from tests.support.processes import run as run_jobqueue

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("engine")]

LATER: SubmitOptions = {"queue": "nobody", "delay": "1h"}  # pending for the test's length


@pytest.fixture(scope="module")
def service(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    folder = tmp_path_factory.mktemp("wait")
    with serving_with_token(database_url, folder, handlers=MODULE, workers=2) as running:
        yield running


# A fixture of tests.support.operator_service, used by name.
__all__ = ["client"]


def run(service: Service, *args: str) -> subprocess.CompletedProcess[str]:
    """`jobqueue <args>` against `service`, found by the environment's variables."""
    return run_jobqueue(list(args), JOBQUEUE_URL=service.base_url, JOBQUEUE_TOKEN=TOKEN)


def card(output: str) -> dict[str, str]:
    """A printed job's first line of each field, by name (`history` and what a field's
    further lines hold are left out)."""
    fields = {}
    for line in output.split("\nhistory")[0].splitlines():
        if line and not line[0].isspace():
            name, _, value = line.partition(" ")
            fields[name] = value.strip()
    return fields


def test_a_completed_job_is_printed_with_its_result_and_progress(
    service: Service, client: Client
) -> None:
    job = client.submit("summarise", {"rows": 3})

    done = run(service, "jobs", "wait", str(job.id))
    again = run(service, "jobs", "wait", str(job.id), "--json")
    shown = run(service, "jobs", "show", str(job.id))

    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    printed = card(done.stdout)
    assert (printed["id"], printed["status"]) == (str(job.id), "completed")
    # Kept as jsonb, which keeps an object's keys in an order of its own.
    assert printed["result"] == '{"name": "café", "rows": 3}'
    # The last report, kept after the end, and when the worker wrote it.
    assert printed["progress"].startswith("100% (3 of 3): row 3, at 20")
    assert card(shown.stdout)["result"] == printed["result"]
    # An ended job is answered at once, as often as it is asked for.
    assert again.returncode == 0, again.stderr
    record = json.loads(again.stdout)
    assert record["result"] == {"rows": 3, "name": "café"}
    assert {name: record["progress"][name] for name in ("fraction", "done", "total")} == {
        "fraction": 1.0,
        "done": 3,
        "total": 3,
    }


def test_a_job_that_ended_otherwise_exits_3_saying_how(service: Service, client: Client) -> None:
    failed = client.submit("refuse")
    cancelled = client.submit("sleep", {"duration": "1s"}, **LATER)
    client.cancel(cancelled.id)

    refused = run(service, "jobs", "wait", str(failed.id), "--timeout", "30s")
    stopped = run(service, "jobs", "wait", str(cancelled.id), "--json")

    assert refused.returncode == 3, refused.stderr
    assert card(refused.stdout)["status"] == "failed"
    assert refused.stderr == (
        f"jobqueue: job {failed.id} ended failed: Permanent: no such customer\n"
    )
    assert stopped.returncode == 3, stopped.stderr
    assert json.loads(stopped.stdout)["status"] == "cancelled"
    assert stopped.stderr == f"jobqueue: job {cancelled.id} ended cancelled\n"


def test_a_job_not_ended_in_time_exits_4_saying_its_status(
    service: Service, client: Client
) -> None:
    job = client.submit("sleep", {"duration": "1s"}, **LATER)

    started = time.monotonic()
    waited = run(service, "jobs", "wait", str(job.id), "--timeout", "1s", "--json")
    took = time.monotonic() - started
    now = run(service, "jobs", "wait", str(job.id), "--timeout", "0s")

    assert waited.returncode == 4, waited.stderr
    assert waited.stdout == ""
    assert waited.stderr == (
        f"jobqueue: job {job.id} has not ended after 1s: it is pending; waiting again is "
        f"safe: jobqueue jobs wait {job.id}\n"
    )
    assert took >= 1
    assert (now.returncode, now.stdout) == (4, "")
    assert "has not ended after 0s: it is pending; waiting again is safe" in now.stderr
    assert client.job(job.id).status == "pending"  # the wait changed nothing


def test_an_unknown_job_or_a_bad_timeout_is_said_as_for_every_command(
    service: Service,
) -> None:
    unknown = run(service, "jobs", "wait", str(uuid.uuid4()))
    bad = run(service, "jobs", "wait", str(uuid.uuid4()), "--timeout", "soon")

    assert unknown.returncode == 1
    assert unknown.stderr.startswith("jobqueue: 404: ")
    assert bad.returncode == 2
    assert "argument --timeout: invalid duration 'soon'" in bad.stderr


def test_jobs_submit_waits_for_the_end_with_wait(service: Service, client: Client) -> None:
    completed = run(
        service, "jobs", "submit", "summarise", "--payload", '{"rows": 2}', "--wait", "--json"
    )
    failed = run(service, "jobs", "submit", "refuse", "--wait")
    later = run(
        service,
        "jobs",
        "submit",
        "sleep",
        "--payload",
        '{"duration": "1s"}',
        "--queue",
        "nobody",
        "--delay",
        "1h",
        "--wait-timeout",
        "500ms",
    )

    assert completed.returncode == 0, completed.stderr
    record = json.loads(completed.stdout)
    assert (record["status"], record["result"]) == ("completed", {"rows": 2, "name": "café"})
    assert failed.returncode == 3, failed.stderr
    assert card(failed.stdout)["status"] == "failed"
    assert failed.stderr.endswith(" ended failed: Permanent: no such customer\n")
    # Not ended in time: the job's id, which was printed nowhere else, and how to go on.
    assert (later.returncode, later.stdout) == (4, "")
    said = re.fullmatch(
        r"jobqueue: job (\S+) has not ended after 0\.5s: it is pending; waiting again is "
        r"safe: jobqueue jobs wait \1\n",
        later.stderr,
    )
    assert said is not None, later.stderr
    assert client.job(said[1]).payload == {"duration": "1s"}


def test_a_long_result_is_cut_on_the_card_and_whole_in_json(
    service: Service, client: Client
) -> None:
    job = client.submit("long_result")
    client.wait(job.id, timeout=30)

    shown = run(service, "jobs", "show", str(job.id))
    whole = run(service, "jobs", "show", str(job.id), "--json")

    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.split("\nresult")[1].split("\nprogress")[0].splitlines()
    assert len(lines) == 21
    assert lines[0].split() == ["["]
    assert lines[3].strip().startswith('"text": "xxx')
    assert lines[3].endswith("…")
    assert lines[-1].strip().startswith("… (")
    assert lines[-1].endswith("bytes of JSON in all: --json shows it whole)")
    assert len(json.loads(whole.stdout)["result"]) == 100


async def test_an_interrupted_wait_leaves_the_job_and_says_how_to_wait_again(
    service: Service, client: Client, engine: AsyncEngine
) -> None:
    job = client.submit("sleep", {"duration": "1s"}, **LATER)
    waiting = await asyncio.create_subprocess_exec(
        str(JOBQUEUE),
        *("jobs", "wait", str(job.id), "--timeout", "1m"),
        cwd=REPO_ROOT,
        env=environment(None, JOBQUEUE_URL=service.base_url, JOBQUEUE_TOKEN=TOKEN),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=_interruptible,
    )
    try:
        # Interrupted once the service holds its wait: the job is marked as waited for.
        deadline = time.monotonic() + 60
        async with engine.connect() as connection:
            statement = text("SELECT watched FROM jobs WHERE id = :id")
            while not (await connection.execute(statement, {"id": job.id})).scalar_one():
                assert time.monotonic() < deadline, "the wait never reached the service"
                await connection.rollback()
                await asyncio.sleep(0.05)
        waiting.send_signal(signal.SIGINT)
        out, err = await asyncio.wait_for(waiting.communicate(), timeout=30)
    finally:
        if waiting.returncode is None:
            waiting.kill()

    assert waiting.returncode == 130
    assert out == b""
    assert err.decode() == (
        f"jobqueue: interrupted: job {job.id} goes on; waiting again is safe: "
        f"jobqueue jobs wait {job.id}\n"
    )
    assert client.job(job.id).status == "pending"


def _interruptible() -> None:
    # A shell starts its background jobs with SIGINT ignored, which their children
    # inherit, and Python then raises no KeyboardInterrupt: the command is started as
    # a terminal's foreground one is, whatever started the tests.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
