"""A job's dashboard page without a browser or a database: the actions each status
offers (the transitions table's, no other), a payload shown escaped and cut, an attempt's
duration as read at a glance, the trace id from the job's traceparent, and the page's
answers for an unknown id, a malformed one and an unknown action."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest
from litestar.testing import TestClient

from jobqueue.domain.attempts import AttemptRecord, Outcome
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.status import Status
from jobqueue.domain.transitions import DELETABLE, TRANSITIONS, Operation
from jobqueue.entrypoints.http.ui.job_page import (
    ACTIONS,
    PAYLOAD_SHOWN_BYTES,
    actions_for,
    done_message,
    job_view,
    payload_shown,
    took,
)
from jobqueue.entrypoints.http.ui.pages import template_config
from tests.fakes import InMemoryJobStore
from tests.support.api import build_api

HOSTILE = "<script>alert(1)</script>\"'&"
T0 = datetime(2030, 1, 1, tzinfo=UTC)
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _job(status: Status = Status.DEAD_LETTER, **fields: object) -> Job:
    stored = NewJob.build(type="mail", payload={"to": "a@example.com"}, max_attempts=3).stored(
        uuid4(), T0
    )
    return replace(stored, status=status, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("status", list(Status))
def test_a_status_offers_exactly_the_actions_the_transitions_table_allows(status: Status) -> None:
    allowed = {t.operation for t in TRANSITIONS if t.source is status}
    expected = [
        name
        for name, permitted in (
            ("retry", Operation.RETRY in allowed),
            ("cancel", Operation.CANCEL in allowed),
            ("discard", status in DELETABLE),
        )
        if permitted
    ]

    assert [action.name for action in actions_for(status)] == expected


def test_a_running_job_offers_cancel_only_and_a_dead_letter_retry_and_discard() -> None:
    assert [a.name for a in actions_for(Status.PROCESSING)] == ["cancel"]
    assert [a.name for a in actions_for(Status.DEAD_LETTER)] == ["retry", "discard"]


def test_after_an_action_the_page_says_what_it_did_and_ignores_anything_else() -> None:
    for action in ACTIONS:
        message = done_message(action.done)
        assert message is not None
        assert message.startswith(action.done.capitalize())
    assert done_message(HOSTILE) is None
    assert done_message(None) is None


def test_a_payload_is_indented_json() -> None:
    shown = payload_shown({"to": "ä@example.com", "n": [1, 2]})

    assert shown.text == '{\n  "to": "ä@example.com",\n  "n": [\n    1,\n    2\n  ]\n}'
    assert not shown.cut


def test_a_large_payload_is_cut_at_its_limit_never_inside_a_character() -> None:
    shown = payload_shown({"text": "é" * PAYLOAD_SHOWN_BYTES})

    assert shown.cut
    assert shown.size > PAYLOAD_SHOWN_BYTES
    assert len(shown.text.encode()) <= PAYLOAD_SHOWN_BYTES
    assert shown.text.startswith('{\n  "text": "éé')


@pytest.mark.parametrize(
    ("elapsed", "shown"),
    [
        (timedelta(0), "0 ms"),
        (timedelta(milliseconds=12.7), "12 ms"),
        (timedelta(seconds=1.25), "1.2 s"),
        (timedelta(seconds=59.94), "59.9 s"),
        (timedelta(minutes=2, seconds=3), "2 min 3 s"),
        (timedelta(seconds=-1), "0 ms"),
    ],
)
def test_an_attempts_duration_reads_at_a_glance(elapsed: timedelta, shown: str) -> None:
    assert took(elapsed) == shown


def test_the_view_shows_every_attempt_of_the_jobs_history_with_its_duration() -> None:
    earlier = AttemptRecord(
        1, Outcome.RETRIED, "boom", T0, T0 + timedelta(milliseconds=250), "host:1"
    )
    job = _job(
        Status.PROCESSING,
        attempts=2,
        attempt_log=(earlier,),
        started_at=T0 + timedelta(seconds=5),
        worker="host:2",
        traceparent=TRACEPARENT,
    )

    view = job_view(job)

    assert [(row.attempt, row.outcome) for row in view.attempts] == [
        (1, Outcome.RETRIED),
        (2, Outcome.RUNNING),
    ]
    assert [row.duration for row in view.attempts] == ["250 ms", ""]
    assert view.attempts[0].started is not None
    assert view.attempts[0].started.text == "2030-01-01 00:00:00.000 UTC"
    assert view.live
    assert view.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert not job_view(_job(traceparent="not a traceparent")).trace_id
    assert not job_view(_job(Status.COMPLETED)).live


def test_the_page_escapes_the_payload_the_error_and_the_keys() -> None:
    engine = template_config("1.0", trace_url="https://t.example/{trace_id}").engine_instance
    failed = AttemptRecord(1, Outcome.DEAD_LETTER, f"first line\n{HOSTILE}", T0, T0, HOSTILE)
    job = _job(
        type=HOSTILE,
        queue=HOSTILE,
        payload={"note": HOSTILE},
        unique_key=HOSTILE,
        idempotency_key=HOSTILE,
        attempt_log=(failed,),
        traceparent=TRACEPARENT,
    )
    html = engine.get_template("job.html").render(
        view=job_view(job),
        payload=payload_shown(job.payload),
        message=None,
        problem=HOSTILE,
        csrf="token",
        signed_in=False,
    )

    assert "<script>" not in html
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 7
    # The error's lines stay lines.
    assert '<pre class="error">first line\n&lt;script&gt;' in html
    assert 'href="https://t.example/4bf92f3577b34da6a3ce929d0e0e4736"' in html


def test_a_read_only_page_offers_no_action() -> None:
    engine = template_config("1.0", read_only=True).engine_instance
    html = engine.get_template("fragments/job_status.html").render(view=job_view(_job()))

    assert "action-retry" not in html
    assert "hx-get" not in html, "a dead letter is not live: nothing to refresh"


def test_an_unknown_id_is_a_404_page_and_a_malformed_one_a_400_page() -> None:
    with TestClient(build_api(store=InMemoryJobStore()).app) as client:
        unknown = client.get(f"/ui/jobs/{uuid4()}")
        malformed = client.get("/ui/jobs/%3Cscript%3E")
        fragment = client.get("/ui/jobs/nope/fragments/status")

    assert unknown.status_code == 404
    assert "not found" in unknown.text
    assert malformed.status_code == 400
    assert "job id must be a UUID" in malformed.text
    assert "<script>" not in malformed.text
    assert fragment.status_code == 400
    for answer in (unknown, malformed):
        assert answer.headers["content-type"].startswith("text/html")


def test_an_unknown_action_is_a_404_page() -> None:
    with TestClient(build_api(store=InMemoryJobStore()).app) as client:
        job = client.post("/jobs", json={"type": "sleep", "payload": {"duration": "1ms"}}).json()
        answer = client.get(f"/ui/jobs/{job['id']}/explode")

    assert answer.status_code == 404
    assert answer.headers["content-type"].startswith("text/html")
