"""`Client`: the calls of `calls.py`, sent over one httpx connection pool, tried again as
`Retries` says; and what both clients hand httpx. `AsyncClient` (`async_sessions.py`)
differs only in how it waits."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Self, TypeVar, Unpack
from uuid import UUID

import httpx

from jobqueue.client import calls, sending
from jobqueue.client.calls import Batch, Call
from jobqueue.client.connection import http_options
from jobqueue.client.errors import Unavailable
from jobqueue.client.sending import Retries
from jobqueue.domain.status import Status
from jobqueue.wire.queue_records import QueueRecord, QueueStateView
from jobqueue.wire.records import (
    JobList,
    JobRecord,
    JobStatusView,
    JobTypeView,
    PeriodicView,
    SubmittedRecord,
    WorkerView,
    WorkflowRecord,
)
from jobqueue.wire.requests import BatchJob, SubmitOptions, job_request

T = TypeVar("T")
DEFAULT_RETRIES = Retries()


def http_request(call: Call[Any], timeout: float) -> dict[str, Any]:
    """httpx's arguments for `call`, from a client whose requests take `timeout`."""
    headers = dict(call.headers)
    content = call.encoded()
    if content is not None:
        headers["Content-Type"] = "application/json"
    request: dict[str, Any] = {
        "method": call.method,
        "url": call.path,
        "params": call.params,
        "headers": headers,
        "content": content,
    }
    if call.held:
        request["timeout"] = timeout + call.held
    return request


class Client:
    """The API, synchronously. `base_url` is the service (`http://host:8080`); `token`
    one of its API_TOKENS; `timeout` each request's, in seconds. Use it as a context
    manager, or `close()` it."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 10.0,
        retries: Retries = DEFAULT_RETRIES,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        options = http_options(base_url, token, timeout, headers)
        self._http = httpx.Client(**options, transport=transport)
        self._base_url: str = options["base_url"]
        self._timeout = timeout
        self._retries = retries

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: Call[T]) -> T:
        tries = 0
        while True:
            try:
                verdict = sending.judged(
                    call,
                    self._http.request(**http_request(call, self._timeout)),
                    tries,
                    self._retries,
                )
            except httpx.TransportError as error:
                verdict = sending.after_failure(call, error, tries, self._retries, self._base_url)
            if not isinstance(verdict, float):
                return verdict
            time.sleep(verdict)
            tries += 1

    def submit(
        self, job_type: str, payload: Any = None, **options: Unpack[SubmitOptions]
    ) -> SubmittedRecord:
        """`POST /jobs`: the new job, or (`duplicate`) the job holding its unique key, or
        (`replayed`) the job an earlier call with this `idempotency_key` made. With
        `depends_on` (stored jobs' ids) it is `waiting` until each of them completed."""
        return self._send(calls.submit(job_request(job_type, payload, **options)))

    def submit_batch(self, jobs: Sequence[BatchJob], *, callback: BatchJob | None = None) -> Batch:
        """`POST /jobs/batch`: all of `jobs` (made with `job_request`) or none, as a list in
        the order sent. Jobs may depend on each other (`job_request(..., name=...,
        depends_on=[...])`); `callback`, a job run once all of them ended whatever their
        outcomes, is the answer's `callback`; such a batch is a workflow, its id the
        answer's `workflow_id`."""
        return Batch.of(self._send(calls.submit_batch(jobs, callback)))

    def job(self, job_id: UUID | str) -> JobRecord:
        return self._send(calls.job(job_id))

    def wait(self, job_id: UUID | str, timeout: float | None = 60.0) -> JobRecord:
        """The job's record once it ended (its `result`, `status`), woken by the service
        as it ends; raises `NotEnded` (a `TimeoutError`) when `timeout` seconds pass
        first. None waits as long as it takes."""
        waiting = calls.Waiting(job_id, timeout, time.monotonic)
        record = None
        while (call := waiting.next_call(record)) is not None:
            record = self._send(call)
        return waiting.answer(record)

    def status(self, job_id: UUID | str) -> JobStatusView:
        return self._send(calls.status(job_id))

    def jobs(
        self,
        status: Status | str,
        *,
        job_type: str | None = None,
        queue: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> JobList:
        """One page of `GET /jobs`; `next_cursor` asks for the next."""
        return self._send(
            calls.jobs(status, job_type=job_type, queue=queue, limit=limit, cursor=cursor)
        )

    def iter_jobs(
        self,
        status: Status | str,
        *,
        job_type: str | None = None,
        queue: str | None = None,
        page_size: int | None = None,
    ) -> Iterator[JobRecord]:
        """Every job of `status` (narrowed by type and queue), page after page."""
        cursor = None
        while True:
            page = self.jobs(status, job_type=job_type, queue=queue, limit=page_size, cursor=cursor)
            yield from page.jobs
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def retry(self, job_id: UUID | str) -> JobRecord:
        return self._send(calls.retry(job_id))

    def cancel(self, job_id: UUID | str) -> JobRecord:
        return self._send(calls.cancel(job_id))

    def run_now(self, job_id: UUID | str) -> JobRecord:
        """A pending job (scheduled, or waiting out a backoff) due at once."""
        return self._send(calls.run_now(job_id))

    def reschedule(
        self,
        job_id: UUID | str,
        *,
        run_at: datetime | None = None,
        delay: timedelta | str | None = None,
    ) -> JobRecord:
        """A pending job due at `run_at`, or `delay` from now (one of the two)."""
        return self._send(calls.reschedule(job_id, run_at, delay))

    def delete(self, job_id: UUID | str) -> JobRecord:
        """Delete a job that is not running; answers it as it was."""
        return self._send(calls.delete(job_id))

    def retry_many(
        self,
        status: Status | str,
        *,
        queue: str | None = None,
        job_type: str | None = None,
        limit: int | None = None,
    ) -> int:
        return self._send(calls.retry_many(status, queue, job_type, limit)).retried

    def discard_many(
        self,
        status: Status | str,
        *,
        queue: str | None = None,
        job_type: str | None = None,
        limit: int | None = None,
    ) -> int:
        return self._send(calls.discard_many(status, queue, job_type, limit)).discarded

    def cancel_many(
        self,
        status: Status | str,
        *,
        queue: str | None = None,
        job_type: str | None = None,
        limit: int | None = None,
    ) -> int:
        return self._send(calls.cancel_many(status, queue, job_type, limit)).cancelled

    def workflow(self, workflow_id: UUID | str) -> WorkflowRecord:
        """Every job of a workflow (results left out: read a job for its own), in the order
        submitted, its counts by status, and whether every job ended."""
        return self._send(calls.workflow(workflow_id))

    def cancel_workflow(self, workflow_id: UUID | str) -> int:
        """Cancel every job of a workflow that has not ended; how many were."""
        return self._send(calls.cancel_workflow(workflow_id)).count

    def retry_workflow(self, workflow_id: UUID | str) -> int:
        """Retry a workflow's failed, dead-lettered and cancelled jobs, each waiting again
        for those of its dependencies retried with it; how many were."""
        return self._send(calls.retry_workflow(workflow_id)).count

    def queues(self) -> list[QueueRecord]:
        return self._send(calls.queues()).queues

    def pause(self, queue: str) -> QueueStateView:
        return self._send(calls.pause(queue))

    def resume(self, queue: str) -> QueueStateView:
        return self._send(calls.resume(queue))

    def set_limits(
        self,
        queue: str,
        *,
        concurrency: int | None = None,
        rate: str | None = None,
        key_concurrency: int | None = None,
        key_rate: str | None = None,
        type_rates: Mapping[str, str] | None = None,
    ) -> QueueStateView:
        """Set `queue`'s limits, replacing every one it had (None: no such limit): at most
        `concurrency` running at once, at most `rate` starts (such as "100/1m"), at most
        `key_concurrency` running at once and `key_rate` starts ("10/1m") per partition
        key, at most so many starts of each job type `type_rates` names
        ({"send_sms": "10/s"}), across every process, from the moment this returns."""
        return self._send(
            calls.set_limits(queue, concurrency, rate, key_concurrency, key_rate, type_rates)
        )

    def lift_limits(self, queue: str) -> QueueStateView:
        """Lift every limit of `queue`."""
        return self._send(calls.lift_limits(queue))

    def periodic(self) -> list[PeriodicView]:
        return self._send(calls.periodic()).periodic

    def workers(self) -> list[WorkerView]:
        """The worker processes alive now, as their heartbeats describe them."""
        return self._send(calls.workers()).workers

    def types(self) -> list[JobTypeView]:
        """The job types the API accepts, with their payload schemas and defaults."""
        return self._send(calls.types()).types

    def healthy(self) -> bool:
        """Whether the process answers `/healthz`."""
        return self._send(calls.health()).status == "ok"

    def ready(self) -> bool:
        """Whether `/readyz` says the service takes work (False on its 503)."""
        try:
            return self._send(calls.ready()).status == "ready"
        except Unavailable:
            return False
