"""The operator's commands without a service: what they say when it is out of reach, or
when what they were given could never be sent, and where their options belong."""

from __future__ import annotations

import socket

import pytest

from jobqueue.client import SubmitOptions
from jobqueue.entrypoints.cli.main import build_parser
from tests.support.processes import run

pytestmark = pytest.mark.slow


def test_an_unreachable_service_is_one_line_naming_its_url() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"

    done = run(["jobs", "list", "--status", "pending", "--url", url])

    assert done.returncode == 1
    assert done.stderr == f"jobqueue: cannot reach {url} (connection refused, 4 tries)\n"


def test_a_service_that_does_not_answer_is_one_line_naming_its_url() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(16)  # connections are made, and never answered
        url = f"http://127.0.0.1:{listening.getsockname()[1]}"

        done = run(["--request-timeout", "0.5", "--url", url, "queues", "list"])

    assert done.returncode == 1
    assert done.stderr == f"jobqueue: cannot reach {url} (no answer within 0.5s, 4 tries)\n"


def test_a_token_pasted_with_its_placeholder_is_refused_before_sending() -> None:
    done = run(["queues", "list", "--token", "…"], JOBQUEUE_URL="http://127.0.0.1:1")

    assert done.returncode == 1
    assert done.stderr.startswith("jobqueue: token: character 1 is '…' (U+2026), which an ")
    assert "Traceback" not in done.stderr


def test_the_service_options_are_refused_where_they_mean_nothing() -> None:
    done = run(["--url", "http://127.0.0.1:1", "--json", "migrate"])

    assert done.returncode == 2
    assert (
        "--url, --json: for the jobs, workflows, queues, types, periodic and workers commands, "
        "not migrate" in done.stderr
    )


def test_jobs_submit_has_an_option_for_every_option_of_the_client() -> None:
    args = build_parser().parse_args(["jobs", "submit", "sleep"])

    names = SubmitOptions.__required_keys__ | SubmitOptions.__optional_keys__
    assert {name for name in names if not hasattr(args, name)} == set()
