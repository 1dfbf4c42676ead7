"""`AsyncClient`: `Client` (`sessions.py`) for asyncio, the same calls waited for with
`await`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping, Sequence
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
from jobqueue.client.sessions import DEFAULT_RETRIES, http_request
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


class AsyncClient:
    """The API, for asyncio: `Client`'s methods, awaited. `async with`, or `aclose()`."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 10.0,
        retries: Retries = DEFAULT_RETRIES,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        options = http_options(base_url, token, timeout, headers)
        self._http = httpx.AsyncClient(**options, transport=transport)
        self._base_url: str = options["base_url"]
        self._timeout = timeout
        self._retries = retries

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: Call[T]) -> T:
        tries = 0
        while True:
            try:
                verdict = sending.judged(
                    call,
                    await self._http.request(**http_request(call, self._timeout)),
                    tries,
                    self._retries,
                )
            except httpx.TransportError as error:
                verdict = sending.after_failure(call, error, tries, self._retries, self._base_url)
            if not isinstance(verdict, float):
                return verdict
            await asyncio.sleep(verdict)
            tries += 1

    async def submit(
        self, job_type: str, payload: Any = None, **options: Unpack[SubmitOptions]
    ) -> SubmittedRecord:
        return await self._send(calls.submit(job_request(job_type, payload, **options)))

    async def submit_batch(
        self, jobs: Sequence[BatchJob], *, callback: BatchJob | None = None
    ) -> Batch:
        """As `Client.submit_batch`."""
        return Batch.of(await self._send(calls.submit_batch(jobs, callback)))

    async def job(self, job_id: UUID | str) -> JobRecord:
        return await self._send(calls.job(job_id))

    # The timeout bounds the wait itself and is answered by NotEnded, not a cancellation.
    async def wait(self, job_id: UUID | str, timeout: float | None = 60.0) -> JobRecord:  # noqa: ASYNC109
        """As `Client.wait`."""
        waiting = calls.Waiting(job_id, timeout, time.monotonic)
        record = None
        while (call := waiting.next_call(record)) is not None:
            record = await self._send(call)
        return waiting.answer(record)

    async def status(self, job_id: UUID | str) -> JobStatusView:
        return await self._send(calls.status(job_id))

    async def jobs(
        self,
        status: Status | str,
        *,
        job_type: str | None = None,
        queue: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> JobList:
        return await self._send(
            calls.jobs(status, job_type=job_type, queue=queue, limit=limit, cursor=cursor)
        )

    async def iter_jobs(
        self,
        status: Status | str,
        *,
        job_type: str | None = None,
        queue: str | None = None,
        page_size: int | None = None,
    ) -> AsyncIterator[JobRecord]:
        cursor = None
        while True:
            page = await self.jobs(
                status, job_type=job_type, queue=queue, limit=page_size, cursor=cursor
            )
            for each in page.jobs:
                yield each
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def retry(self, job_id: UUID | str) -> JobRecord:
        return await self._send(calls.retry(job_id))

    async def cancel(self, job_id: UUID | str) -> JobRecord:
        return await self._send(calls.cancel(job_id))

    async def run_now(self, job_id: UUID | str) -> JobRecord:
        """A pending job (scheduled, or waiting out a backoff) due at once."""
        return await self._send(calls.run_now(job_id))

    async def reschedule(
        self,
        job_id: UUID | str,
        *,
        run_at: datetime | None = None,
        delay: timedelta | str | None = None,
    ) -> JobRecord:
        """A pending job due at `run_at`, or `delay` from now (one of the two)."""
        return await self._send(calls.reschedule(job_id, run_at, delay))

    async def delete(self, job_id: UUID | str) -> JobRecord:
        """Delete a job that is not running; answers it as it was."""
        return await self._send(calls.delete(job_id))

    async def retry_many(
        self,
        status: Status | str,
        *,
        queue: str | None = None,
        job_type: str | None = None,
        limit: int | None = None,
    ) -> int:
        return (await self._send(calls.retry_many(status, queue, job_type, limit))).retried

    async def discard_many(
        self,
        status: Status | str,
        *,
        queue: str | None = None,
        job_type: str | None = None,
        limit: int | None = None,
    ) -> int:
        return (await self._send(calls.discard_many(status, queue, job_type, limit))).discarded

    async def cancel_many(
        self,
        status: Status | str,
        *,
        queue: str | None = None,
        job_type: str | None = None,
        limit: int | None = None,
    ) -> int:
        return (await self._send(calls.cancel_many(status, queue, job_type, limit))).cancelled

    async def workflow(self, workflow_id: UUID | str) -> WorkflowRecord:
        """As `Client.workflow`."""
        return await self._send(calls.workflow(workflow_id))

    async def cancel_workflow(self, workflow_id: UUID | str) -> int:
        return (await self._send(calls.cancel_workflow(workflow_id))).count

    async def retry_workflow(self, workflow_id: UUID | str) -> int:
        return (await self._send(calls.retry_workflow(workflow_id))).count

    async def queues(self) -> list[QueueRecord]:
        return (await self._send(calls.queues())).queues

    async def pause(self, queue: str) -> QueueStateView:
        return await self._send(calls.pause(queue))

    async def resume(self, queue: str) -> QueueStateView:
        return await self._send(calls.resume(queue))

    async def set_limits(
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
        return await self._send(
            calls.set_limits(queue, concurrency, rate, key_concurrency, key_rate, type_rates)
        )

    async def lift_limits(self, queue: str) -> QueueStateView:
        """Lift every limit of `queue`."""
        return await self._send(calls.lift_limits(queue))

    async def periodic(self) -> list[PeriodicView]:
        return (await self._send(calls.periodic())).periodic

    async def workers(self) -> list[WorkerView]:
        """The worker processes alive now, as their heartbeats describe them."""
        return (await self._send(calls.workers())).workers

    async def types(self) -> list[JobTypeView]:
        return (await self._send(calls.types())).types

    async def healthy(self) -> bool:
        return (await self._send(calls.health())).status == "ok"

    async def ready(self) -> bool:
        try:
            return (await self._send(calls.ready())).status == "ready"
        except Unavailable:
            return False
