"""The operator's commands for graphs and workflows against a running `jobqueue serve` of
`workflow_handlers`' pipeline: `jobs submit --after` (and `--run-anyway`, `--wait`), a
batch file with names and a callback, `jobs show` of a dependent job, and `workflows
show|cancel|retry`, tables and JSON, with their exit statuses."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator

import pytest

from jobqueue.client import Client
from tests.integration.workflow_handlers import MODULE
from tests.support.processes import Service, serving
from tests.support.processes import run as run_jobqueue

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("engine")]


@pytest.fixture(scope="module")
def service(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    with serving(
        ["serve", "--handlers", MODULE],
        tmp_path_factory.mktemp("workflow-commands"),
        DATABASE_URL=database_url,
        WORKERS="2",
        POLL_INTERVAL="200ms",
        QUEUES="default",
    ) as running:
        yield running


@pytest.fixture
def client(service: Service) -> Iterator[Client]:
    with Client(service.base_url) as client:
        yield client


def run(service: Service, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return run_jobqueue(list(args), stdin=stdin, JOBQUEUE_URL=service.base_url)


def idle() -> str:
    """A queue no worker of the service consumes: its jobs stay where they are."""
    return f"c{uuid.uuid4().hex[:8]}"


def card(text: str) -> dict[str, str]:
    """A card's rows (`name  value`), by name; a row without a value is ''."""
    rows = [line.split(None, 1) for line in text.splitlines() if line and not line[0].isspace()]
    return {row[0]: row[1] if len(row) > 1 else "" for row in rows}


def test_jobs_submit_after_makes_a_waiting_job_that_show_describes(
    service: Service, client: Client
) -> None:
    queue = idle()
    first = client.submit("fetch", {"rows": 1}, queue=queue)
    second = client.submit("fetch", {"rows": 2}, queue=queue)

    made = run(
        service,
        "jobs",
        "submit",
        "transform",
        "--after",
        str(first.id),
        "--after",
        str(second.id),
        "--queue",
        queue,
        "--json",
    )

    assert made.returncode == 0, made.stderr
    job = json.loads(made.stdout)
    assert (job["status"], job["waiting_for"], job["idempotency_key"]) == ("waiting", 2, None)
    assert job["depends_on"] == [str(first.id), str(second.id)]
    shown = run(service, "jobs", "show", job["id"])
    assert shown.returncode == 0, shown.stderr
    rows = card(shown.stdout)
    assert (rows["status"], rows["depends_on"], rows["waiting_for"]) == (
        "waiting",
        str(first.id),
        "2",
    )
    assert rows["workflow_id"] == job["workflow_id"]
    assert "run_anyway" not in rows
    # A job of no graph shows none of it.
    assert not {"depends_on", "workflow_id", "waiting_for"} & set(
        card(run(service, "jobs", "show", str(client.submit("fetch", queue=queue).id)).stdout)
    )

    client.cancel(first.id)
    refused = run(service, "jobs", "submit", "transform", "--after", str(first.id))
    assert refused.returncode == 1
    assert refused.stderr.startswith(f"jobqueue: 400: job {first.id} it depends on is cancelled")
    anyway = run(
        service, "jobs", "submit", "report", "--after", str(first.id), "--run-anyway", "--json"
    )
    assert anyway.returncode == 0, anyway.stderr
    assert (json.loads(anyway.stdout)["status"], json.loads(anyway.stdout)["run_anyway"]) == (
        "pending",
        True,
    )
    alone = run(service, "jobs", "submit", "report", "--run-anyway")
    assert alone.returncode == 2
    assert "--run-anyway: give the jobs it runs after with --after" in alone.stderr


def test_jobs_submit_after_and_wait_prints_the_dependent_once_it_ended(
    service: Service, client: Client
) -> None:
    fetched = client.submit("fetch", {"rows": 21})

    done = run(
        service, "jobs", "submit", "transform", "--after", str(fetched.id), "--wait", "--json"
    )

    assert done.returncode == 0, done.stderr
    assert (json.loads(done.stdout)["status"], json.loads(done.stdout)["result"]) == (
        "completed",
        {"rows": 42},
    )


def test_a_batch_file_with_names_and_a_callback_then_the_workflow_s_commands(
    service: Service, client: Client
) -> None:
    queue = idle()
    body = {
        "jobs": [
            {"type": "fetch", "payload": {"rows": 3}, "name": "fetch", "queue": queue},
            {"type": "transform", "name": "transform", "depends_on": ["fetch"], "queue": queue},
        ],
        "callback": {"type": "report", "queue": queue},
    }

    submitted = run(service, "jobs", "submit-batch", "-", stdin=json.dumps(body))

    assert submitted.returncode == 0, submitted.stderr
    header, *rows = submitted.stdout.splitlines()
    assert header.split()[:5] == ["id", "type", "queue", "pri", "status"]
    # The callback last, after the batch's jobs.
    assert [(row.split()[1], row.split()[4]) for row in rows] == [
        ("fetch", "pending"),
        ("transform", "waiting"),
        ("report", "waiting"),
    ]
    workflow = client.job(rows[0].split()[0]).workflow_id
    assert workflow is not None

    shown = run(service, "workflows", "show", str(workflow))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split() == ["id", "type", "status", "waiting_for", "last_error"]
    assert [line.split()[1:] for line in lines[1:4]] == [
        ["fetch", "pending"],
        ["transform", "waiting", "1"],
        ["report", "waiting", "2"],
    ]
    assert lines[4:] == [
        "",
        f"workflow {workflow}: 3 jobs (2 waiting, 1 pending), not ended",
    ]
    as_json = json.loads(run(service, "workflows", "show", str(workflow), "--json").stdout)
    assert as_json["counts"] == {"waiting": 2, "pending": 1}
    assert [job["id"] for job in as_json["jobs"]] == [row.split()[0] for row in rows]

    cancelled = run(service, "workflows", "cancel", str(workflow))
    assert cancelled.returncode == 0, cancelled.stderr
    assert card(cancelled.stdout) == {"id": str(workflow), "count": "3"}
    after = run(service, "workflows", "show", str(workflow)).stdout.splitlines()
    # The callback too: it is a job of the workflow that had not ended.
    assert [line.split()[2] for line in after[1:4]] == ["cancelled"] * 3
    assert after[-1] == f"workflow {workflow}: 3 jobs (3 cancelled), ended"
    retried = run(service, "workflows", "retry", str(workflow), "--json")
    assert retried.returncode == 0, retried.stderr
    assert json.loads(retried.stdout) == {"id": str(workflow), "count": 3}
    again = run(service, "workflows", "show", str(workflow), "--json")
    assert [job["status"] for job in json.loads(again.stdout)["jobs"]] == [
        "pending",
        "waiting",
        "waiting",
    ]
    assert run(service, "workflows", "cancel", str(workflow)).returncode == 0


def test_a_workflow_that_is_not_is_said_on_stderr(service: Service) -> None:
    unknown = uuid.uuid4()
    for action in ("show", "cancel", "retry"):
        missing = run(service, "workflows", action, str(unknown))
        assert missing.returncode == 1
        assert missing.stderr.startswith(f"jobqueue: 404: no workflow {unknown}")
        bad = run(service, "workflows", action, "nope")
        assert bad.returncode == 1
        assert bad.stderr == "jobqueue: 400: workflow id must be a UUID, got 'nope'\n"
    usage = run(service, "workflows", "show")
    assert usage.returncode == 2
    assert "the following arguments are required: WORKFLOW_ID" in usage.stderr
