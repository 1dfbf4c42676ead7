"""A workflow's dashboard page without a browser or a database: the actions a workflow
offers (the transitions table's, no other), how a dependency is named (by its step and
type in the workflow, by its id outside it), how many are named and rows shown, what the
page says after an action, the page and its confirmation escaped; and a job page's
workflow, dependencies, "runs anyway" and "waiting for"."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime
from uuid import UUID, uuid4

import pytest
from litestar.plugins.jinja import JinjaTemplateEngine

from jobqueue.domain.dependencies import MAX_WORKFLOW_JOBS
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.status import LIVE, Status
from jobqueue.domain.transitions import TRANSITIONS, Operation
from jobqueue.entrypoints.http.ui.job_page import SHOWN_DEPENDENCIES, dependency_facts, job_view
from jobqueue.entrypoints.http.ui.links import short
from jobqueue.entrypoints.http.ui.pages import template_config
from jobqueue.entrypoints.http.ui.workflow_page import (
    ACTIONS,
    BY_NAME,
    SHOWN_ROWS,
    done_message,
    workflow_view,
)

HOSTILE = "<script>alert(1)</script>\"'&"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
T0 = datetime(2030, 1, 1, tzinfo=UTC)
WORKFLOW = UUID("01a24771-09bd-7df7-9d90-b14a88074944")


def _job(
    status: Status = Status.PENDING,
    kind: str = "step",
    workflow: UUID | None = WORKFLOW,
    **fields: object,
) -> Job:
    stored = NewJob.build(type=kind, max_attempts=3).stored(uuid4(), T0)
    return replace(stored, status=status, workflow_id=workflow, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("status", list(Status))
def test_a_workflow_offers_exactly_the_actions_the_transitions_table_allows(status: Status) -> None:
    allowed = {t.operation for t in TRANSITIONS if t.source is status}
    expected = [
        name
        for name, permitted in (
            ("cancel", Operation.CANCEL in allowed),
            ("retry", Operation.RETRY_WORKFLOW in allowed),
        )
        if permitted
    ]

    view = workflow_view(WORKFLOW, [_job(Status.COMPLETED), _job(status)])

    assert [action.name for action in view.actions] == expected


def test_cancel_takes_the_live_jobs_and_retry_those_that_ended_without_completing() -> None:
    assert BY_NAME["cancel"].allowed == frozenset(LIVE)
    assert BY_NAME["retry"].allowed == {Status.FAILED, Status.DEAD_LETTER, Status.CANCELLED}
    view = workflow_view(
        WORKFLOW,
        [_job(Status.WAITING), _job(Status.WAITING), _job(Status.FAILED), _job(Status.COMPLETED)],
    )

    assert view.taken(BY_NAME["cancel"]).text == "2 jobs (2 waiting)"
    assert view.taken(BY_NAME["retry"]).text == "1 job (1 failed)"
    assert view.counts == ((Status.WAITING, 2), (Status.COMPLETED, 1), (Status.FAILED, 1))
    assert (view.total, view.not_ended, view.not_completed) == (4, 2, 3)
    assert not view.ended


def test_a_workflow_ended_when_no_job_is_live_and_completed_when_every_one_did() -> None:
    done = workflow_view(WORKFLOW, [_job(Status.COMPLETED), _job(Status.COMPLETED)])
    failed = workflow_view(WORKFLOW, [_job(Status.COMPLETED), _job(Status.DEAD_LETTER)])

    assert done.ended
    assert done.completed
    assert not done.actions
    assert failed.ended
    assert not failed.completed
    assert [action.name for action in failed.actions] == ["retry"]


def test_a_dependency_is_named_by_its_step_and_type_in_the_workflow_else_by_its_id() -> None:
    outside = uuid4()
    first = _job(Status.COMPLETED, kind="extract")
    second = _job(Status.WAITING, depends_on=(first.id, outside), waiting_for=1)

    rows = workflow_view(WORKFLOW, [first, second]).rows

    assert rows[0].waits_for.shown == ()
    assert rows[0].waiting_for is None
    [inside, other] = rows[1].waits_for.shown
    assert (inside.href, inside.text) == (f"/ui/jobs/{first.id}", "#1 extract")
    assert inside.title == f"{first.id}: completed"
    assert (other.href, other.text, other.title) == (
        f"/ui/jobs/{outside}",
        short(outside),
        str(outside),
    )
    assert rows[1].waiting_for == 1
    assert rows[1].short_id == "…" + str(second.id)[-8:]


def test_a_fan_in_names_its_first_dependencies_and_counts_the_rest() -> None:
    steps = [_job(Status.COMPLETED) for _ in range(12)]
    callback = _job(Status.PENDING, depends_on=tuple(j.id for j in steps), run_anyway=True)

    row = workflow_view(WORKFLOW, [*steps, callback]).rows[-1]

    assert [link.text for link in row.waits_for.shown] == [f"#{n} step" for n in range(1, 6)]
    assert row.waits_for.more == 7
    assert row.run_anyway


def test_a_large_workflow_shows_its_first_rows_and_counts_them_all() -> None:
    jobs = [_job(Status.COMPLETED) for _ in range(SHOWN_ROWS + 3)]
    cut = workflow_view(WORKFLOW, jobs)
    every = workflow_view(WORKFLOW, jobs * (MAX_WORKFLOW_JOBS // len(jobs) + 1))

    assert len(cut.rows) == SHOWN_ROWS
    assert cut.total == SHOWN_ROWS + 3
    assert cut.read_all
    assert not every.read_all, "as many as the store reads: it may have more"


def test_an_error_is_cut_and_moments_read_in_utc() -> None:
    ended = _job(
        Status.FAILED,
        last_error="x" * 500,
        started_at=T0,
        updated_at=datetime(2030, 1, 1, 2, 3, 4, tzinfo=UTC),
    )

    [row] = workflow_view(WORKFLOW, [ended]).rows

    assert row.error == "x" * 160 + "…"
    assert row.started is not None
    assert row.started.text == "2030-01-01 00:00:00"
    assert row.finished is not None
    assert (row.finished.iso, row.finished.text) == (
        "2030-01-01T02:03:04+00:00",
        "2030-01-01 02:03:04",
    )


def test_after_an_action_the_page_says_how_many_jobs_it_took_and_ignores_anything_else() -> None:
    assert done_message("retried", "2") == (
        "Retried 2 jobs: each went back with a fresh budget of attempts."
    )
    assert done_message("cancelled", "1") == (
        "Cancelled 1 job: those that had not ended will not run."
    )
    assert done_message("cancelled", HOSTILE) == (
        "Cancelled its jobs: those that had not ended will not run."
    )
    assert done_message("cancelled", "9" * 50) is not None
    assert "9" * 50 not in (done_message("cancelled", "9" * 50) or "")
    assert done_message(HOSTILE, "2") is None
    assert done_message(None) is None
    for action in ACTIONS:
        assert (done_message(action.done) or "").startswith(action.done.capitalize())


def _engine(read_only: bool = False) -> JinjaTemplateEngine:
    return template_config("1.0", read_only=read_only).engine_instance


def test_the_page_escapes_types_errors_and_the_message() -> None:
    first = _job(Status.DEAD_LETTER, kind=HOSTILE, last_error=f"first line\n{HOSTILE}")
    second = _job(Status.CANCELLED, kind=HOSTILE, depends_on=(first.id,))
    view = workflow_view(WORKFLOW, [first, second])

    html = (
        _engine()
        .get_template("workflow.html")
        .render(view=view, message=HOSTILE, problem=HOSTILE, csrf="token", signed_in=False)
    )
    confirmation = (
        _engine()
        .get_template("workflow_confirm.html")
        .render(
            view=view,
            action=BY_NAME["retry"],
            taken=view.taken(BY_NAME["retry"]),
            csrf="token",
            signed_in=False,
        )
    )

    assert "<script>" not in html
    # Two types, the error, the dependency's name, the message and the problem.
    assert html.count(ESCAPED) == 6
    assert f">#1 {ESCAPED}&#34;&#39;&amp;</a>" in html
    assert "It takes 2 jobs (1 dead letter, 1 cancelled) now." in confirmation
    assert '<form class="confirm" method="post"' in confirmation
    assert 'name="csrf" value="token"' in confirmation


def test_a_read_only_page_offers_no_action_and_an_ended_one_does_not_refresh() -> None:
    view = workflow_view(WORKFLOW, [_job(Status.FAILED)])

    html = _engine(read_only=True).get_template("fragments/workflow_status.html").render(view=view)

    assert "action-retry" not in html
    assert "hx-get" not in html, "an ended workflow has nothing to refresh"
    live = (
        _engine()
        .get_template("fragments/workflow_status.html")
        .render(view=workflow_view(WORKFLOW, [_job(Status.WAITING)]))
    )
    assert re.search(r'hx-trigger="every 5s"', live)
    assert "action-cancel" in live


def test_a_job_s_page_shows_its_workflow_dependencies_and_what_it_waits_for() -> None:
    many = tuple(uuid4() for _ in range(SHOWN_DEPENDENCIES + 3))
    waiting = _job(Status.WAITING, depends_on=many, waiting_for=4, run_anyway=True)

    facts = {fact.name: fact for fact in dependency_facts(waiting)}

    assert list(facts) == ["workflow", "depends_on", "run_anyway", "waiting_for"]
    [workflow] = facts["workflow"].value.shown  # type: ignore[union-attr]
    assert (workflow.href, workflow.text) == (f"/ui/workflows/{WORKFLOW}", "…88074944")
    depends = facts["depends_on"].value
    assert len(depends.shown) == SHOWN_DEPENDENCIES  # type: ignore[union-attr]
    assert depends.more == 3  # type: ignore[union-attr]
    assert depends.shown[0].href == f"/ui/jobs/{many[0]}"  # type: ignore[union-attr]
    assert facts["waiting_for"].value == f"4 of {len(many)} jobs"
    assert facts["depends_on"].kind == "links"
    assert dependency_facts(_job(workflow=None)) == ()
    # Ended: no longer waiting for anything.
    assert "waiting_for" not in {
        f.name for f in dependency_facts(replace(waiting, status=Status.CANCELLED))
    }


def test_a_job_s_status_part_lays_its_dependency_facts_out_as_links() -> None:
    job = _job(Status.WAITING, kind=HOSTILE, depends_on=(uuid4(),), waiting_for=1)

    html = _engine().get_template("fragments/job_status.html").render(view=job_view(job))

    assert '<dd data-fact="workflow"><ul class="links">' in html
    assert f'href="/ui/jobs/{job.depends_on[0]}"' in html  # type: ignore[index]
    assert '<dd data-fact="waiting_for">1 of 1 jobs</dd>' in html
