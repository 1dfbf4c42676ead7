"""The clients' graphs and workflows, against a scripted transport: what a submission with
dependencies sends (no Idempotency-Key, and not sent again once it may have arrived),
a batch's names and callback, the `Batch` it answers, and the workflow calls with
their errors."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from jobqueue.client import (
    AsyncClient,
    BadRequest,
    Batch,
    NotFound,
    ServiceUnreachable,
    job_request,
)
from tests.support.scripted_client import FAST, RECORD, Script, client, error, ok

ITEM = {**RECORD, "duplicate": False, "replayed": False}
WORKFLOW = str(uuid.uuid4())


def item(**fields: Any) -> dict[str, Any]:
    return {**ITEM, "id": str(uuid.uuid4()), **fields}


def test_a_job_that_depends_on_stored_ones_sends_their_ids_and_no_key() -> None:
    first, second = uuid.uuid4(), uuid.uuid4()
    waiting = item(status="waiting", depends_on=[str(first), str(second)], waiting_for=2)
    script = Script(ok(waiting, 201))
    with client(script) as jobs:
        made = jobs.submit("sleep", depends_on=[first, str(second)], run_anyway=True)

    assert (made.status, made.depends_on, made.waiting_for) == ("waiting", [first, second], 2)
    sent = script.requests[0]
    assert json.loads(sent.content) == {
        "type": "sleep",
        "payload": {},
        "depends_on": [str(first), str(second)],
        "run_anyway": True,
    }
    # The service refuses a key on a graph's job: none is made up for it.
    assert "idempotency-key" not in sent.headers


def test_a_job_without_dependencies_is_sent_as_an_earlier_service_takes_it() -> None:
    script = Script(ok(status=201))
    with client(script) as jobs:
        jobs.submit("sleep", depends_on=[], run_anyway=False)

    assert json.loads(script.requests[0].content) == {"type": "sleep", "payload": {}}
    assert "idempotency-key" in script.requests[0].headers


def test_a_dependent_job_is_not_sent_again_once_it_may_have_arrived() -> None:
    # Without a key, a second request would store a second job.
    broken = httpx.ReadError("connection reset")
    with (
        client(Script(broken, ok(status=201))) as jobs,
        pytest.raises(ServiceUnreachable) as raised,
    ):
        jobs.submit("sleep", depends_on=[uuid.uuid4()])
    assert "POST /jobs may have been carried out" in str(raised.value)
    # A connection never made sent nothing: tried again.
    with client(Script(httpx.ConnectError("refused"), ok(status=201))) as jobs:
        jobs.submit("sleep", depends_on=[uuid.uuid4()])


def test_depends_on_is_a_list_not_one_id() -> None:
    with pytest.raises(TypeError, match="depends_on takes a list of job ids"):
        job_request("sleep", depends_on=str(uuid.uuid4()))


def test_a_batch_graph_sends_names_places_and_a_callback_without_keys() -> None:
    jobs_sent = [item(), item(status="waiting"), item(status="waiting")]
    callback = item(status="waiting", run_anyway=True, waiting_for=3)
    answer = {"jobs": jobs_sent, "callback": callback, "workflow_id": WORKFLOW}
    script = Script(ok(answer, 201))
    with client(script) as jobs:
        batch = jobs.submit_batch(
            [
                job_request("fetch", {"url": "u"}, name="fetch"),
                job_request("parse", name="parse", depends_on=["fetch"]),
                job_request("store", depends_on=[0, "parse"]),
            ],
            callback=job_request("report", {"to": "ops"}),
        )

    # Still the list it always was, with the callback and the workflow beside it.
    assert isinstance(batch, list)
    assert [each.id for each in batch] == [uuid.UUID(each["id"]) for each in jobs_sent]
    assert batch.callback is not None
    assert (batch.callback.status, batch.callback.waiting_for) == ("waiting", 3)
    assert batch.workflow_id == uuid.UUID(WORKFLOW)
    assert json.loads(script.requests[0].content) == {
        "jobs": [
            {"type": "fetch", "payload": {"url": "u"}, "name": "fetch"},
            {"type": "parse", "payload": {}, "name": "parse", "depends_on": ["fetch"]},
            {"type": "store", "payload": {}, "depends_on": ["0", "parse"]},
        ],
        "callback": {"type": "report", "payload": {"to": "ops"}},
    }


def test_a_batch_graph_is_not_sent_again_once_it_may_have_arrived() -> None:
    broken = httpx.ReadError("connection reset")
    with client(Script(broken, ok({"jobs": [ITEM]}, 201))) as jobs:
        plain = jobs.submit_batch([job_request("sleep")])  # its keys replay the first
    assert (plain.callback, plain.workflow_id) == (None, None)
    with (
        client(Script(broken, ok({"jobs": [ITEM]}, 201))) as jobs,
        pytest.raises(ServiceUnreachable, match="POST /jobs/batch may have been carried out"),
    ):
        jobs.submit_batch([job_request("sleep")], callback=job_request("sleep"))


def test_a_batch_refused_for_its_graph_is_a_bad_request() -> None:
    cycle = "depends_on makes a cycle, so none of these jobs could ever start: a -> b -> a"
    script = Script(error(400, cycle))
    with client(script) as jobs, pytest.raises(BadRequest) as raised:
        jobs.submit_batch(
            [
                job_request("sleep", name="a", depends_on=["b"]),
                job_request("sleep", name="b", depends_on=["a"]),
            ]
        )
    assert raised.value.message == cycle


def test_a_batch_compares_equal_to_the_list_of_its_jobs() -> None:
    assert Batch([], callback=None) == []


def workflow_answer(jobs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": WORKFLOW, "counts": {"pending": 1, "waiting": 1}, "jobs": jobs, "ended": False}


def test_a_workflow_is_read_cancelled_and_retried() -> None:
    jobs_of = [item(workflow_id=WORKFLOW), item(status="waiting", workflow_id=WORKFLOW)]
    script = Script(
        ok(workflow_answer(jobs_of)),
        ok({"id": WORKFLOW, "count": 2}),
        ok({"id": WORKFLOW, "count": 1}),
    )
    with client(script) as jobs:
        shown = jobs.workflow(WORKFLOW)
        assert jobs.cancel_workflow(uuid.UUID(WORKFLOW)) == 2
        assert jobs.retry_workflow(WORKFLOW) == 1

    assert (shown.id, shown.ended, shown.counts) == (
        uuid.UUID(WORKFLOW),
        False,
        {"pending": 1, "waiting": 1},
    )
    assert [job.status for job in shown.jobs] == ["pending", "waiting"]
    assert [(r.method, r.url.path) for r in script.requests] == [
        ("GET", f"/workflows/{WORKFLOW}"),
        ("POST", f"/workflows/{WORKFLOW}/cancel"),
        ("POST", f"/workflows/{WORKFLOW}/retry"),
    ]


@pytest.mark.parametrize(("status", "kind"), [(404, NotFound), (400, BadRequest)])
def test_a_workflow_s_errors_are_the_client_s(status: int, kind: type[Exception]) -> None:
    script = Script(*[error(status, "no workflow")] * 3)
    with client(script) as jobs:
        for call in (jobs.workflow, jobs.cancel_workflow, jobs.retry_workflow):
            with pytest.raises(kind, match="no workflow"):
                call("a/b")
    assert [request.url.raw_path for request in script.requests] == [
        b"/workflows/a%2Fb",
        b"/workflows/a%2Fb/cancel",
        b"/workflows/a%2Fb/retry",
    ]


def test_a_workflow_s_cancel_is_not_sent_again_once_it_may_have_arrived() -> None:
    # A second cancel would answer 0, hiding what the first did; a second retry would
    # retry what failed since.
    broken = httpx.ReadError("connection reset")
    for action in ("cancel_workflow", "retry_workflow"):
        with (
            client(Script(broken, ok({"id": WORKFLOW, "count": 1}))) as jobs,
            pytest.raises(ServiceUnreachable, match="may have been carried out"),
        ):
            getattr(jobs, action)(WORKFLOW)


async def test_the_async_client_submits_graphs_and_acts_on_workflows() -> None:
    answer = {"jobs": [ITEM], "callback": item(), "workflow_id": WORKFLOW}
    script = Script(
        ok(answer, 201),
        ok(item(status="waiting"), 201),
        ok(workflow_answer([ITEM])),
        ok({"id": WORKFLOW, "count": 3}),
        ok({"id": WORKFLOW, "count": 0}),
        error(404, "no workflow"),
    )
    async with AsyncClient(
        "http://jobs.test", transport=httpx.MockTransport(script), retries=FAST
    ) as jobs:
        batch = await jobs.submit_batch(
            [job_request("sleep", name="a")], callback=job_request("sleep")
        )
        waiting = await jobs.submit("sleep", depends_on=[batch[0].id])
        assert (await jobs.workflow(WORKFLOW)).id == uuid.UUID(WORKFLOW)
        assert await jobs.cancel_workflow(WORKFLOW) == 3
        assert await jobs.retry_workflow(WORKFLOW) == 0
        with pytest.raises(NotFound):
            await jobs.workflow(uuid.uuid4())

    assert batch.workflow_id == uuid.UUID(WORKFLOW)
    assert batch.callback is not None
    assert waiting.status == "waiting"
    assert json.loads(script.requests[0].content)["callback"] == {"type": "sleep", "payload": {}}
    assert "idempotency-key" not in script.requests[1].headers
