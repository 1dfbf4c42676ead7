"""The operator's commands for graphs and workflows, without a service: `jobs submit
--after … --run-anyway` hands the client its dependencies, `workflows show|cancel|retry`
parse as the other groups do, a workflow prints as a table of its jobs and a line of its
counts, and a job card shows its dependencies only when it has some."""

from __future__ import annotations

import io
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from jobqueue.client import JobRecord, WorkflowRecord
from jobqueue.domain.status import Status
from jobqueue.entrypoints.cli import jobs_commands
from jobqueue.entrypoints.cli.jobs_commands import UsageError
from jobqueue.entrypoints.cli.main import build_parser
from jobqueue.entrypoints.cli.output import write

AT = datetime(2026, 12, 5, 18, 0, tzinfo=UTC)
FIRST, SECOND = uuid.uuid4(), uuid.uuid4()


def record(**fields: Any) -> JobRecord:
    given: dict[str, Any] = {
        "id": uuid.uuid4(),
        "type": "sleep",
        "queue": "default",
        "priority": 0,
        "payload": {},
        "status": Status.PENDING,
        "attempts": 0,
        "max_attempts": 5,
        "run_at": AT,
        "last_error": None,
        "idempotency_key": None,
        "created_at": AT,
        "updated_at": AT,
        "locked_until": None,
        "started_at": None,
        "finished_at": None,
        "history": [],
        "snoozes": 0,
        "unique_key": None,
    }
    return JobRecord(**{**given, **fields})


def printed(command: str, answer: Any) -> list[str]:
    stream = io.StringIO()
    write(command, answer, stream, as_json=False)
    return stream.getvalue().splitlines()


class Submitting:
    """A client that keeps what `submit` was given."""

    def __init__(self) -> None:
        self.options: dict[str, Any] = {}

    def submit(self, job_type: str, payload: Any = None, **options: Any) -> JobRecord:
        self.options = options
        return record(type=job_type)


def test_jobs_submit_after_hands_the_client_its_dependencies() -> None:
    args = build_parser().parse_args(
        ["jobs", "submit", "sleep", "--after", str(FIRST), "--after", str(SECOND), "--run-anyway"]
    )
    client = Submitting()

    jobs_commands._submit(client, args)  # type: ignore[arg-type]

    assert client.options == {"depends_on": [str(FIRST), str(SECOND)], "run_anyway": True}


def test_jobs_submit_without_after_sends_no_dependencies() -> None:
    client = Submitting()

    jobs_commands._submit(client, build_parser().parse_args(["jobs", "submit", "sleep"]))  # type: ignore[arg-type]

    assert client.options == {}


def test_run_anyway_without_after_is_a_usage_error() -> None:
    args = build_parser().parse_args(["jobs", "submit", "sleep", "--run-anyway"])

    with pytest.raises(UsageError, match="--run-anyway: give the jobs it runs after with --after"):
        jobs_commands._submit(Submitting(), args)  # type: ignore[arg-type]


@pytest.mark.parametrize("action", ["show", "cancel", "retry"])
def test_workflows_actions_take_an_id_and_the_service_options(action: str) -> None:
    args = build_parser().parse_args(["workflows", action, "w-1", "--json", "--url", "http://x"])

    assert (args.command, args.action, args.workflow_id) == ("workflows", action, "w-1")
    assert (args.json, args.url) == (True, "http://x")


def test_a_workflow_is_a_table_of_its_jobs_and_a_line_of_its_counts() -> None:
    workflow = uuid.uuid4()
    failed = record(status=Status.FAILED, last_error="Permanent: 30 rows, more than 10")
    long_error = f"job {failed.id} it depends on ended failed"
    jobs = [
        record(type="fetch", status=Status.COMPLETED),
        failed,
        record(status=Status.CANCELLED, last_error=long_error),
        record(type="report", status=Status.WAITING, waiting_for=2, run_anyway=True),
    ]
    counts = {Status.WAITING: 1, Status.COMPLETED: 1, Status.FAILED: 1, Status.CANCELLED: 1}

    lines = printed("workflows", WorkflowRecord(workflow, counts, jobs, ended=False))

    assert lines[0].split() == ["id", "type", "status", "waiting_for", "last_error"]
    assert [line.split()[:3] for line in lines[1:5]] == [
        [str(job.id), job.type, job.status.value] for job in jobs
    ]
    # The error of a job its dependency cancelled is shown whole: it ends with how.
    assert lines[3].endswith(long_error)
    assert lines[4].split()[3] == "2"
    assert lines[5:] == [
        "",
        f"workflow {workflow}: 4 jobs (1 waiting, 1 completed, 1 failed, 1 cancelled), not ended",
    ]


def test_a_job_card_shows_its_dependencies_only_when_it_has_some() -> None:
    plain = [line.split()[0] for line in printed("jobs", record()) if line.strip()]
    assert not {"depends_on", "run_anyway", "workflow_id", "waiting_for"} & set(plain)

    workflow = uuid.uuid4()
    card = printed(
        "jobs",
        record(
            status=Status.WAITING,
            depends_on=[FIRST, SECOND],
            waiting_for=1,
            workflow_id=workflow,
        ),
    )

    rows = {line.split()[0]: line.split()[1:] for line in card if line and not line[0].isspace()}
    start = card.index(f"depends_on       {FIRST}")
    assert card[start + 1].strip() == str(SECOND)
    assert (rows["waiting_for"], rows["workflow_id"]) == (["1"], [str(workflow)])
    assert "run_anyway" not in rows


def test_a_job_card_lists_the_first_ten_dependencies() -> None:
    many = [uuid.uuid4() for _ in range(1000)]

    card = printed("jobs", record(status=Status.WAITING, depends_on=many, waiting_for=1000))

    start = next(n for n, line in enumerate(card) if line.startswith("depends_on"))
    shown = [line.split()[-1] for line in card[start : start + 10]]
    assert shown == [str(each) for each in many[:10]]
    assert card[start + 10].strip() == "… and 990 more (--json shows them all)"
