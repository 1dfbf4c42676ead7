"""What the /jobs routes do, apart from HTTP: validate as the worker will, store, announce."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Protocol
from uuid import UUID

import msgspec

from jobqueue.adapters.postgres.endings import EndingWatch
from jobqueue.adapters.telemetry.trace_context import annotate_current_span, current_traceparent
from jobqueue.domain.bulk import Selection, SelectionCount
from jobqueue.domain.dependencies import MAX_DEPENDENCIES, DependencyError, Step
from jobqueue.domain.errors import InvalidJob
from jobqueue.domain.fields import check_schedule
from jobqueue.domain.flow import QueueLimits
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.job_types import KnownTypes
from jobqueue.domain.listing import JobPage, JobQuery, KeyLookup
from jobqueue.domain.ports import JobStore, PayloadDecoder, Submitted
from jobqueue.domain.queues import QueueState, QueueSummary
from jobqueue.wire.requests import BatchJob, CreateJobRequest

_log = logging.getLogger("jobqueue.http")


class SubmissionMetrics(Protocol):
    """What the service records (`adapters.telemetry.metrics.Metrics` is one)."""

    def job_submitted(self) -> None:
        """A submission created a job (an idempotent replay is not counted)."""
        ...

    def jobs_cancelled(self, count: int) -> None:
        """An operator cancelled `count` jobs."""
        ...

    def job_duplicate(self) -> None:
        """A unique submission was answered with the job holding its key."""
        ...


class TypeSource(Protocol):
    """What knows the types a submission may name (`published_types.TypeCatalogue`)."""

    async def knowing(self, names: Collection[str]) -> KnownTypes:
        """The known types, looked up again first if one of `names` is missing."""
        ...


class JobService:
    """Submits, reads, lists, retries, cancels, reschedules and deletes jobs; counts and
    announces those entering the queue.

    A job is validated against the same registry and payload types the workers use (or
    the JSON Schemas they published), so a job the worker would refuse at once is refused
    here, with a 400, instead.
    """

    def __init__(
        self,
        store: JobStore,
        types: TypeSource,
        decoder: PayloadDecoder,
        metrics: SubmissionMetrics,
        *,
        default_max_attempts: int,
        waits: EndingWatch,
        on_enqueued: Callable[[], None] | None = None,
    ) -> None:
        self._store = store
        self._waits = waits
        self._types = types
        self._decoder = decoder
        self._metrics = metrics
        self._default_max_attempts = default_max_attempts
        self._on_enqueued = on_enqueued

    async def submit(self, request: CreateJobRequest, idempotency_key: str | None) -> Submitted:
        """Raises `InvalidJob` for a job that can never run, `IdempotencyConflict` for a
        key reused with a different request, `StoreUnavailable` when nothing was stored."""
        known = await self._types.knowing((request.type,))
        new = self._new_job(request, idempotency_key, known)
        if request.depends_on:
            (submitted,) = await self._store.submit_graph([Step(new, after=request.after())])
        else:
            submitted = await self._store.submit(new)
        job = submitted.job
        _log.info(
            "job submitted",
            extra={
                "job_id": str(job.id),
                "job_type": job.type,
                "replayed": submitted.replayed,
                "duplicate": submitted.duplicate,
            },
        )
        annotate_current_span(
            {
                "job.id": str(job.id),
                "replayed": submitted.replayed,
                "duplicate": submitted.duplicate,
            }
        )
        if self._counted(submitted):
            self._announce()
        return submitted

    async def submit_batch(
        self, requests: Sequence[BatchJob], callback: CreateJobRequest | None = None
    ) -> Sequence[Submitted]:
        """Every job of `requests` (then `callback`, run once they all ended), or none: the
        first invalid one refuses the batch (`InvalidJob` naming its index), a key reused
        with a different job too (`IdempotencyConflict`), a graph that cannot run too
        (`DependencyError`). Idle workers are told once."""
        every = [*requests, *([] if callback is None else [callback])]
        known = await self._types.knowing({request.type for request in every})
        news = []
        for index, request in enumerate(every):
            key = getattr(request, "idempotency_key", msgspec.UNSET)
            where = "callback" if index == len(requests) else f"jobs[{index}]"
            try:
                news.append(self._new_job(request, None if key is msgspec.UNSET else key, known))
            except InvalidJob as error:
                raise InvalidJob(f"{where}: {error}") from None
        if callback is None and not any(r.depends_on or r.name for r in requests):
            submitted = await self._store.submit_many(news)
        else:
            submitted = await self._store.submit_graph(_steps(requests, news, callback))
        created = sum([self._counted(each) for each in submitted])
        # One line for the batch: a thousand lines of the same request would bury it.
        _log.info(
            "jobs submitted",
            extra={
                # `created` is a LogRecord attribute of its own: hence the prefix.
                "count": len(submitted),
                "jobs_created": created,
                "jobs_replayed": sum(each.replayed for each in submitted),
                "jobs_duplicate": sum(each.duplicate for each in submitted),
            },
        )
        annotate_current_span({"jobs.count": len(submitted), "jobs.created": created})
        if created:
            self._announce()
        return submitted

    def _counted(self, submitted: Submitted) -> bool:
        """Count `submitted` in the metrics; whether it created a job."""
        if submitted.duplicate:
            self._metrics.job_duplicate()
            return False
        if submitted.replayed:
            return False
        self._metrics.job_submitted()
        return True

    def _new_job(
        self, request: CreateJobRequest, idempotency_key: str | None, known: KnownTypes
    ) -> NewJob:
        """The job `request` asks for, checked as the worker will check it."""
        # Resolved by the one rule every way in shares (`new_job.resolve`): what the
        # request leaves out from the type's options, then MAX_ATTEMPTS.
        new = NewJob.build(
            type=request.type,
            payload=request.payload,
            **request.options(),
            registered=known,
            default_max_attempts=self._default_max_attempts,
            idempotency_key=idempotency_key,
            # The request's span: the job's attempts continue its trace.
            traceparent=current_traceparent(),
        )
        known.check(new.type, new.payload, self._decoder)
        return new

    async def get(self, job_id: UUID) -> Job:
        return await self._store.get(job_id)

    async def workflow(self, workflow_id: UUID) -> Sequence[Job]:
        return await self._store.workflow(workflow_id)

    async def cancel_workflow(self, workflow_id: UUID) -> int:
        cancelled = await self._store.cancel_workflow(workflow_id)
        self._metrics.jobs_cancelled(cancelled)
        _log.info("workflow cancelled", extra={"workflow_id": str(workflow_id), "count": cancelled})
        return cancelled

    async def retry_workflow(self, workflow_id: UUID) -> int:
        retried = await self._store.retry_workflow(workflow_id)
        _log.info("workflow retried", extra={"workflow_id": str(workflow_id), "count": retried})
        if retried:
            self._announce()
        return retried

    async def wait(self, job_id: UUID, within: timedelta) -> Job:
        """The job once it ended, or as it is after `within` (`EndingWatch.wait`)."""
        return await self._waits.wait(job_id, within)

    async def list_jobs(self, query: JobQuery) -> JobPage:
        return await self._store.list_jobs(query)

    async def find_by_key(self, lookup: KeyLookup) -> Job | None:
        return await self._store.find_by_key(lookup)

    async def retry(self, job_id: UUID) -> Job:
        """An operator's retry: a failed, dead-lettered or cancelled job back to pending
        with a fresh budget."""
        job = await self._store.retry(job_id)
        _log.info("job retried", extra={"job_id": str(job.id), "job_type": job.type})
        self._announce()
        return job

    async def cancel(self, job_id: UUID) -> Job:
        """An operator's cancel of a pending or running job (its process stops it)."""
        job = await self._store.cancel(job_id)
        annotate_current_span({"job.id": str(job.id), "cancelled": True})
        _log.info("job cancelled", extra={"job_id": str(job.id), "job_type": job.type})
        self._metrics.jobs_cancelled(1)
        return job

    async def reschedule(
        self, job_id: UUID, *, run_at: datetime | None = None, delay: timedelta = timedelta(0)
    ) -> Job:
        """An operator's reschedule of a pending job (a zero delay: run it now); raises
        `InvalidJob` for a time no job may have."""
        check_schedule(run_at, None if run_at is not None else delay)
        job = await self._store.reschedule(job_id, run_at=run_at, delay=delay)
        _log.info(
            "job rescheduled",
            extra={"job_id": str(job.id), "job_type": job.type, "run_at": job.run_at.isoformat()},
        )
        if run_at is None and not delay:
            self._announce()
        return job

    async def delete(self, job_id: UUID) -> Job:
        """An operator's delete of one job that is not running."""
        job = await self._store.delete(job_id)
        _log.info(
            "job deleted",
            extra={"job_id": str(job.id), "job_type": job.type, "status": job.status.value},
        )
        return job

    async def count_selected(self, selection: Selection) -> SelectionCount:
        """How many jobs a bulk call of `selection` would act on, among the first
        `bulk.COUNT_BUDGET` of its status's index range."""
        return await self._store.count_selected(selection)

    async def cancel_many(self, selection: Selection) -> int:
        count = await self._store.cancel_many(selection)
        _log.info("jobs cancelled", extra={"count": count, **_described(selection)})
        self._metrics.jobs_cancelled(count)
        return count

    async def retry_many(self, selection: Selection) -> int:
        count = await self._store.retry_many(selection)
        _log.info("jobs retried", extra={"count": count, **_described(selection)})
        if count:
            self._announce()
        return count

    async def discard_many(self, selection: Selection) -> int:
        count = await self._store.discard_many(selection)
        _log.info("jobs discarded", extra={"count": count, **_described(selection)})
        return count

    def _announce(self) -> None:
        # Lets idle workers claim at once instead of at their next poll: the pool of this
        # process directly, those of other processes through a coalesced NOTIFY. Must not
        # block or raise: the job is stored already. Jobs the worker retries after a
        # failure are due later and never announced; polling finds them when due.
        if self._on_enqueued is not None:
            self._on_enqueued()


def _described(selection: Selection) -> dict[str, object]:
    return {
        "status": selection.status.value,
        "queue": selection.queue,
        "job_type": selection.type,
        "limit": selection.limit,
    }


class QueueService:
    """Pauses, resumes, limits and sums up queues; an operator's every change is logged."""

    def __init__(self, store: JobStore) -> None:
        self._store = store

    async def pause(self, name: str) -> QueueState:
        state = await self._store.pause_queue(name)
        _log.info("queue paused", extra={"queue": state.name})
        return state

    async def resume(self, name: str) -> QueueState:
        state = await self._store.resume_queue(name)
        _log.info("queue resumed", extra={"queue": state.name})
        return state

    async def set_limits(self, name: str, limits: QueueLimits) -> QueueState:
        state = await self._store.set_queue_limits(name, limits)
        _log.info("queue limits set", extra={"queue": state.name, "limits": str(limits)})
        return state

    async def summaries(self, max_age: timedelta | None = None) -> Sequence[QueueSummary]:
        """Every queue's summary, its counts up to about `max_age` old when given."""
        return await self._store.queue_summaries(max_age)

    async def summary(self, name: str, max_age: timedelta | None = None) -> QueueSummary:
        """`name`'s summary; a queue nothing names yet is running and holds no jobs (queues
        exist as soon as a job names them)."""
        return await self._store.queue_summary(name, max_age)


def _steps(
    requests: Sequence[BatchJob], news: Sequence[NewJob], callback: CreateJobRequest | None
) -> list[Step]:
    """A batch as a graph: each job with its name and what it waits for; the callback
    after every one of them, whatever their outcomes."""
    steps = [
        Step(
            new, name=None if request.name is msgspec.UNSET else request.name, after=request.after()
        )
        for request, new in zip(requests, news, strict=False)
    ]
    if callback is not None:
        if len(requests) > MAX_DEPENDENCIES:
            raise DependencyError(
                f"callback: a callback waits for every job of its batch, at most "
                f"{MAX_DEPENDENCIES:,}; this batch has {len(requests):,}"
            )
        last = replace(news[-1], run_anyway=True)
        steps.append(Step(last, after=(*range(len(requests)), *callback.after())))
    return steps
