"""A job's dashboard page without a browser or a database: the actions each status
offers (the transitions table's, no other), a payload and a result shown escaped and cut,
a progress report as read at a glance, an attempt's duration likewise, the trace id from
the job's traceparent, and the page's answers for an unknown id, a malformed one and an
unknown action."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest
from litestar.testing import TestClient

from jobqueue.domain.attempts import AttemptRecord, Outcome
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.progress import Progress
from jobqueue.domain.status import Status
from jobqueue.domain.transitions import DELETABLE, TRANSITIONS, Operation
from jobqueue.entrypoints.http.ui.job_page import (
    ACTIONS,
    PAYLOAD_SHOWN_BYTES,
    actions_for,
    done_message,
    job_view,
    payload_shown,
    percent,
    progress_shown,
    size_text,
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
    job = replace(
        job,
        status=Status.COMPLETED,
        result={"said": HOSTILE},
        progress=replace(Progress.build(0.5, message=HOSTILE), at=T0),
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
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 9
    assert (
        '<pre class="json result" tabindex="0"><code>{\n  &#34;said&#34;: &#34;&lt;script&gt;'
        in html
    )
    assert 'data-fact="progress-message">&lt;script&gt;' in html
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


@pytest.mark.parametrize(
    ("size", "shown"),
    [
        (0, "0 bytes"),
        (1, "1 byte"),
        (1023, "1,023 bytes"),
        (1024, "1 KiB"),
        (64 * 1024, "64 KiB"),
        (1536, "1.5 KiB"),
        (1024**2, "1 MiB"),
        (3 * 1024**2 // 2, "1.5 MiB"),
    ],
)
def test_a_size_reads_at_a_glance(size: int, shown: str) -> None:
    assert size_text(size) == shown


@pytest.mark.parametrize(
    ("fraction", "shown"),
    [(0.0, 0), (0.29, 29), (0.5749, 57), (0.999, 99), (1.0, 100), (1 / 3, 33)],
)
def test_a_fraction_is_a_whole_percent_rounded_down(fraction: float, shown: int) -> None:
    assert percent(fraction) == shown


def test_a_report_shows_its_fraction_counts_message_and_age() -> None:
    report = replace(Progress.build(done=1_204, total=3_000, message="rows"), at=T0)
    job = _job(Status.PROCESSING, started_at=T0 - timedelta(seconds=1), progress=report)

    shown = progress_shown(job, T0 + timedelta(seconds=3))

    assert shown is not None
    assert (shown.fraction, shown.percent, shown.counts) == (
        1_204 / 3_000,
        "40%",
        "1,204 of 3,000 done",
    )
    assert shown.message == "rows"
    assert shown.written_ago == "3 s"
    assert shown.written is not None
    assert shown.written.text == "2030-01-01 00:00:00.000 UTC"
    assert shown.note is None
    assert progress_shown(_job(Status.PROCESSING), T0) is None


def test_a_report_older_than_the_running_attempt_says_so() -> None:
    report = replace(Progress.build(0.8), at=T0)
    later = T0 + timedelta(minutes=1)
    running = _job(Status.PROCESSING, started_at=later, progress=report)
    ended = _job(Status.COMPLETED, started_at=later, progress=report)
    own = _job(Status.COMPLETED, started_at=T0 - timedelta(seconds=1), progress=report)

    assert [
        shown.note if (shown := progress_shown(job, later)) else None
        for job in (running, ended, own)
    ] == [
        "From an earlier attempt; this one has not reported yet.",
        "From an earlier attempt.",
        "The last report of its last attempt.",
    ]


def test_only_a_completed_job_has_a_result_part() -> None:
    completed = job_view(_job(Status.COMPLETED, result=[1, "two"]))
    without = job_view(_job(Status.COMPLETED))
    failed = job_view(_job(Status.DEAD_LETTER))

    assert completed.completed
    assert completed.result is not None
    assert completed.result.text == '[\n  1,\n  "two"\n]'
    assert (without.completed, without.result) == (True, None)
    assert (failed.completed, failed.result) == (False, None)
    html = template_config("1.0").engine_instance.get_template("fragments/job_status.html")
    assert "None: its handler returned nothing." in html.render(view=without)
    assert 'id="result-heading"' not in html.render(view=failed)
