"""`jobqueue.client` (sync and async) submitting graphs and acting on workflows, against a
real `jobqueue serve` running the pipeline of `workflow_handlers`: a batch whose jobs
name each other runs in order, each step reading its dependencies' results; a failure
cancels what depends on it while the callback still runs; a job waits for stored jobs
by id; a workflow is read, cancelled and retried; what cannot run is a `BadRequest`
that stores nothing."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest

from jobqueue import Unique
from jobqueue.client import AsyncClient, BadRequest, BatchJob, Client, NotFound, job_request
from tests.integration.workflow_handlers import MODULE
from tests.support.processes import Service, serving

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("engine")]


@pytest.fixture(scope="module")
def service(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    with serving(
        ["serve", "--handlers", MODULE],
        tmp_path_factory.mktemp("workflows"),
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


def idle() -> str:
    """A queue no worker of the service consumes: its jobs stay where they are."""
    return f"w{uuid.uuid4().hex[:8]}"


def test_a_batch_graph_runs_in_order_and_its_callback_reads_every_result(
    client: Client,
) -> None:
    batch = client.submit_batch(
        [
            job_request("fetch", {"rows": 3}, name="orders"),
            job_request("fetch", {"rows": 4}, name="refunds"),
            job_request("transform", name="merge", depends_on=["orders", "refunds"]),
        ],
        callback=job_request("report"),
    )

    assert [job.status for job in batch] == ["pending", "pending", "waiting"]
    assert batch[2].depends_on == [batch[0].id, batch[1].id]
    assert batch.callback is not None
    assert (batch.callback.status, batch.callback.run_anyway) == ("waiting", True)
    assert batch.workflow_id is not None
    assert {job.workflow_id for job in [*batch, batch.callback]} == {batch.workflow_id}
    report = client.wait(batch.callback.id, timeout=30)
    assert report.status == "completed"
    done = {"status": "completed", "completed": True, "error": None}
    assert report.result == [
        {"type": "fetch", **done, "result": {"rows": 3}},
        {"type": "fetch", **done, "result": {"rows": 4}},
        {"type": "transform", **done, "result": {"rows": 14}},
    ]
    workflow = client.workflow(batch.workflow_id)
    assert (workflow.ended, workflow.counts) == (True, {"completed": 4})
    assert [job.id for job in workflow.jobs] == [job.id for job in [*batch, batch.callback]]


def test_a_failure_cancels_its_dependents_and_the_callback_still_runs(client: Client) -> None:
    batch = client.submit_batch(
        [
            job_request("fetch", {"rows": 30}, name="fetch"),
            job_request("transform", {"most": 10}, name="transform", depends_on=["fetch"]),
            job_request("transform", depends_on=["transform"]),
        ],
        callback=job_request("report"),
    )
    assert batch.callback is not None
    assert batch.workflow_id is not None

    report = client.wait(batch.callback.id, timeout=30)

    failed, cancelled = client.job(batch[1].id), client.job(batch[2].id)
    assert (failed.status, failed.last_error) == ("failed", "Permanent: 30 rows, more than 10")
    assert (cancelled.status, cancelled.last_error, cancelled.attempts) == (
        "cancelled",
        f"job {failed.id} it depends on ended failed",
        0,
    )
    assert report.status == "completed"
    assert [(each["status"], each["error"]) for each in report.result] == [
        ("completed", None),
        ("failed", "Permanent: 30 rows, more than 10"),
        ("cancelled", f"job {failed.id} it depends on ended failed"),
    ]
    workflow = client.workflow(batch.workflow_id)
    assert workflow.counts == {"completed": 2, "failed": 1, "cancelled": 1}
    # The failed step and the one it cancelled run again; the same payload fails again.
    assert client.retry_workflow(batch.workflow_id) == 2
    again = client.wait(batch[2].id, timeout=30)
    assert (again.status, again.last_error) == (
        "cancelled",
        f"job {failed.id} it depends on ended failed",
    )


def test_a_job_waits_for_stored_jobs_by_id(client: Client) -> None:
    queue = idle()
    first = client.submit("fetch", {"rows": 1}, queue=queue)
    waiting = client.submit("transform", depends_on=[first.id], queue=queue)
    assert (waiting.status, waiting.waiting_for, waiting.depends_on) == ("waiting", 1, [first.id])
    assert waiting.idempotency_key is None
    assert waiting.workflow_id is not None
    assert client.job(first.id).workflow_id == waiting.workflow_id

    client.cancel(first.id)

    assert client.job(waiting.id).last_error == f"job {first.id} it depends on ended cancelled"
    with pytest.raises(BadRequest, match=f"job {first.id} it depends on is cancelled"):
        client.submit("transform", depends_on=[first.id], queue=queue)
    anyway = client.submit("report", depends_on=[first.id], run_anyway=True, queue=queue)
    assert (anyway.status, anyway.run_anyway) == ("pending", True)


def test_a_workflow_is_cancelled_and_retried(client: Client) -> None:
    queue = idle()
    batch = client.submit_batch(
        [
            job_request("fetch", {"rows": 1}, name="a", queue=queue),
            job_request("transform", depends_on=["a"], queue=queue),
        ]
    )
    assert batch.workflow_id is not None
    assert batch.callback is None

    assert client.cancel_workflow(batch.workflow_id) == 2
    assert [job.status for job in client.workflow(batch.workflow_id).jobs] == [
        "cancelled",
        "cancelled",
    ]
    assert client.retry_workflow(str(batch.workflow_id)) == 2
    shown = client.workflow(batch.workflow_id)
    assert [job.status for job in shown.jobs] == ["pending", "waiting"]
    assert (shown.counts, shown.ended) == ({"waiting": 1, "pending": 1}, False)
    assert client.cancel_workflow(batch.workflow_id) == 2


def test_an_unknown_workflow_is_not_found_and_a_bad_id_a_bad_request(client: Client) -> None:
    for act in (client.workflow, client.cancel_workflow, client.retry_workflow):
        with pytest.raises(NotFound, match="no workflow"):
            act(uuid.uuid4())
        with pytest.raises(BadRequest, match="workflow id must be a UUID, got 'nope'"):
            act("nope")


def _refused(queue: str) -> list[tuple[list[BatchJob], str]]:
    """Batches whose graphs cannot run, in `queue`, each with what the service says."""
    return [
        (
            [
                job_request("fetch", name="a", depends_on=["b"], queue=queue),
                job_request("fetch", name="b", depends_on=["a"], queue=queue),
            ],
            "depends_on makes a cycle, so none of these jobs could ever start: a -> b -> a",
        ),
        ([job_request("fetch", depends_on=["nobody"], queue=queue)], "depends_on names 'nobody'"),
        (
            [job_request("fetch", depends_on=[uuid.uuid4()], queue=queue)],
            "which is neither a job of this submission nor a stored job's id",
        ),
        (
            [job_request("fetch", name="a", idempotency_key="k-1", queue=queue)],
            "a job with dependencies, or depended on, takes no Idempotency-Key",
        ),
        (
            [job_request("fetch", name="a", unique=Unique(key="u"), queue=queue)],
            "a job with dependencies, or depended on, cannot be unique",
        ),
    ]


def test_a_graph_that_cannot_run_is_refused_storing_nothing(client: Client) -> None:
    queue = idle()
    for jobs, said in _refused(queue):
        with pytest.raises(BadRequest, match=re.escape(said)):
            client.submit_batch(jobs)

    assert list(client.iter_jobs("pending", queue=queue)) == []
    assert list(client.iter_jobs("waiting", queue=queue)) == []


async def test_the_async_client_submits_a_graph_and_reads_its_workflow(
    service: Service,
) -> None:
    async with AsyncClient(service.base_url) as client:
        batch = await client.submit_batch(
            [
                job_request("fetch", {"rows": 2}, name="fetch"),
                job_request("transform", depends_on=["fetch"]),
            ],
            callback=job_request("report"),
        )
        assert batch.callback is not None
        assert batch.workflow_id is not None
        report = await client.wait(batch.callback.id, timeout=30)
        workflow = await client.workflow(batch.workflow_id)
        assert await client.cancel_workflow(batch.workflow_id) == 0
        assert await client.retry_workflow(batch.workflow_id) == 0
        with pytest.raises(NotFound):
            await client.workflow(uuid.uuid4())

    assert [each["result"] for each in report.result] == [{"rows": 2}, {"rows": 4}]
    assert (workflow.ended, workflow.counts) == (True, {"completed": 3})
