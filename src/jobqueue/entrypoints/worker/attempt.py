"""One attempt: the claimed job on its way through the pool, and running its handler.

Handlers are user code, and none of what they do may kill the pool. Every exception
escaping a handler, including `SystemExit`, `KeyboardInterrupt` and a `CancelledError`
the handler raised on its own, is logged with its traceback and becomes a retryable
failure (unless `is_permanent` says otherwise); a `Snooze`, raised or returned, is the
handler's "not yet". Only cancellation of the attempt by the pool itself (shutdown, a
lost lease, a cancel) ends it as interrupted, and only the attempt's own timeout as timed
out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast
from uuid import UUID

from jobqueue.adapters.results import UnstorableResult, encode_result
from jobqueue.domain.dependencies import Dependency
from jobqueue.domain.errors import is_expected, is_permanent, retry_after
from jobqueue.domain.job import Job, Lease
from jobqueue.domain.outcome import (
    Ending,
    Errored,
    Interrupted,
    Snooze,
    Snoozed,
    Succeeded,
    TimedOut,
)
from jobqueue.domain.ports import PayloadDecoder
from jobqueue.domain.registry import JobContext, Registry, StopReason, StopRequest
from jobqueue.entrypoints.worker.pool_config import PoolConfig
from jobqueue.entrypoints.worker.progress import ProgressWriter
from jobqueue.entrypoints.worker.threads import run_in_thread
from jobqueue.entrypoints.worker.tracing import AttemptSpan
from jobqueue.entrypoints.worker.transactions import TransactionalEndings

_log = logging.getLogger("jobqueue.worker")
# Handlers log through `ctx.logger`, an adapter on this logger carrying the job's fields.
_handler_log = logging.getLogger("jobqueue.jobs")


# What a dependent's context reads of the jobs it waited for (`JobStore.dependency_results`).
ReadDependencies = Callable[[Sequence[UUID]], Awaitable[Sequence[Dependency]]]


@dataclass(slots=True, eq=False)
class Attempt:
    """One claimed job on its way through the pool, from the claim to its outcome."""

    job: Job
    # The job's lease, built once: it keys the pool's leases held and its outcome write.
    lease: Lease
    started: float  # time.monotonic()
    # When the claim that returned the job ran (time.time_ns()), for its trace.
    claimed: tuple[int, int]
    # The job's log fields, built once for every line the attempt logs.
    fields: dict[str, Any]
    # When the lease runs out by this process's clock (time.monotonic()): the claim's
    # start plus the lease, moved on by every renewal.
    lease_until: float
    # Set once the outcome write has its own task; from then on cancelling the attempt
    # cannot lose the outcome.
    recording: bool = False
    # The lease is gone (recovered elsewhere, or not renewed in time): no outcome for it.
    lost: bool = False
    # Shutdown gave up on a sync handler whose thread still runs: the job is neither
    # released nor recorded, but left to lease recovery.
    abandoned: bool = False
    # Shutdown gave up waiting for the attempt (SHUTDOWN_TIMEOUT passed, or forced).
    given_up: bool = False
    stop: StopRequest = field(default_factory=StopRequest)
    # The task running the attempt, once it has one (the pool cancels it when the lease
    # is lost).
    task: asyncio.Task[None] | None = None
    span: AttemptSpan | None = None


class Executor:
    """Runs handlers: async ones on the loop, plain ones in a thread of their own."""

    def __init__(
        self,
        registry: Registry,
        decoder: PayloadDecoder,
        config: PoolConfig,
        progress: ProgressWriter,
        endings: TransactionalEndings,
        dependencies: ReadDependencies,
    ) -> None:
        self._registry = registry
        self._dependencies = dependencies
        self._decoder = decoder
        self._config = config
        self._progress = progress
        self._endings = endings

    async def run(self, attempt: Attempt, span: AttemptSpan) -> Ending:
        """Run the attempt's handler under its timeout; say how it ended."""
        # The job's own (its submission's, or its type's when it was resolved), else the
        # handler's now (a job stored before its type declared one), else JOB_TIMEOUT.
        job = attempt.job
        limit = (
            job.timeout or self._registry.options_for(job.type).timeout or self._config.job_timeout
        )
        task = asyncio.current_task()
        assert task is not None
        # The timeout is one timer that cancels the task, and a flag saying it did:
        # `asyncio.timeout`'s context manager does the same with several times the work,
        # paid once per job.
        deadline = _Deadline(task)
        timer = asyncio.get_running_loop().call_later(limit.total_seconds(), deadline.expire)
        try:
            returned = await self._invoke(attempt, limit)
        except Snooze as snooze:
            deadline.settle()
            return Snoozed(snooze.delay)
        except asyncio.CancelledError as error:
            if deadline.expired and task.uncancel() == 0:
                _log.warning("job timed out", extra=attempt.fields)
                return TimedOut(limit)
            if task.cancelling():
                # Only the pool cancels attempts: to shut down, or for a lost lease.
                task.uncancel()
                return Interrupted()
            return self._errored(attempt, error, span)
        except BaseException as error:
            deadline.settle()
            return self._errored(attempt, error, span)
        finally:
            timer.cancel()
        # A handler that caught the timeout's cancellation and returned still succeeded.
        deadline.settle()
        if isinstance(returned, Snooze):
            return Snoozed(returned.delay)
        try:
            return Succeeded(encode_result(returned, self._config.result_max_bytes))
        except UnstorableResult as error:
            return self._errored(attempt, error, span)

    async def _invoke(self, attempt: Attempt, limit: timedelta) -> Any:
        """Run the handler; return what it returned (a `Snooze` says "not yet")."""
        job = attempt.job
        spec = self._registry.get(job.type)
        payload: Any = job.payload
        if spec.payload_type is not None:
            payload = self._decoder.decode(job.type, job.payload, spec.payload_type)
        context = JobContext(
            job_id=job.id,
            job_type=job.type,
            attempt=job.attempts,
            max_attempts=job.max_attempts,
            deadline=datetime.now(UTC) + limit,
            # A copy: the handler may change its adapter's fields, not the pool's.
            logger=logging.LoggerAdapter(_handler_log, dict(attempt.fields)),
            stop=attempt.stop,
            snoozes=job.snoozes,
            report_progress=self._progress.reporter(attempt.lease),
            open_transaction=self._endings.opener(attempt.lease),
            read_dependencies=self._reader(job.depends_on) if job.depends_on else None,
        )
        if spec.is_async:
            # An async function's call is its coroutine (`is_async` says so).
            return await cast(Awaitable[Any], spec.func(context, payload))
        thread = run_in_thread(spec.func, context, payload)
        try:
            return await asyncio.shield(thread)
        except asyncio.CancelledError:
            # The timeout, shutdown or a lost lease: the thread runs on, and keeps its
            # slot and its lease until it returns. Its stop reason decides the ending.
            attempt.stop.request(_reason_of(attempt))
            await self._until_returned(attempt, thread)
            raise

    def _reader(self, ids: tuple[UUID, ...]) -> Callable[[], Awaitable[tuple[Dependency, ...]]]:
        """The read of `ids` as the store answers it, once per attempt (a second call
        answers the first's); a failure to read is the handler's, and retried."""
        read: tuple[Dependency, ...] | None = None

        async def dependencies() -> tuple[Dependency, ...]:
            nonlocal read
            if read is None:
                read = tuple(await self._dependencies(ids))
            return read

        return dependencies

    async def _until_returned(self, attempt: Attempt, thread: asyncio.Future[Any]) -> None:
        """Wait for a sync attempt's thread, after it was asked to stop. Once shutdown has
        given up on the attempt the wait is bounded; past it the job is left to lease
        recovery."""
        task = asyncio.current_task()
        while not thread.done():
            if attempt.given_up:
                bound = self._config.outcome_timeout.total_seconds()
                await asyncio.wait({thread}, timeout=bound)
                # Still running: the pool leaves the job to lease recovery.
                attempt.abandoned = not thread.done()
                return
            _log.warning(
                "sync job asked to stop (%s); its thread still runs and keeps its slot",
                attempt.stop.reason,
                extra=attempt.fields,
            )
            try:
                await asyncio.shield(thread)
            except asyncio.CancelledError:
                if task is not None:
                    task.uncancel()
                # The pool cancels a waiting attempt only to give up on it (shutdown), or
                # for a lost lease, after which the thread still holds its slot.
                if not attempt.lost:
                    attempt.given_up = True

    def _errored(self, attempt: Attempt, error: BaseException, span: AttemptSpan) -> Errored:
        text = f"{type(error).__name__}: {error}"
        if not is_expected(error):
            _log.error("job raised %s", type(error).__name__, exc_info=error, extra=attempt.fields)
        elif is_permanent(error):
            # INFO: the WARNING to alert on follows once the ending is recorded
            # (`ending_report.report_failure`); this one says which attempt it was.
            _log.info("job failed permanently: %s", text, extra=attempt.fields)
        else:
            _log.info("job failed, as its handler foresaw: %s", text, extra=attempt.fields)
        span.record_error(error)
        return Errored(
            text,
            permanent=is_permanent(error),
            retry_after=retry_after(error),
        )


class _Deadline:
    """The attempt's timeout: `expire` cancels the attempt's task and remembers it did, so
    that the cancellation is told apart from the pool's own (shutdown, a lost lease)."""

    __slots__ = ("_task", "expired")

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self._task = task
        self.expired = False

    def expire(self) -> None:
        self.expired = True
        self._task.cancel()

    def settle(self) -> None:
        """Take back the timeout's cancellation when the attempt ended without it
        surfacing (caught by the handler): the task must not stay marked as cancelling."""
        if self.expired:
            self.expired = False
            self._task.uncancel()


def _reason_of(attempt: Attempt) -> StopReason:
    # Set by the pool before it cancels; a cancellation it did not set is the timeout's.
    return attempt.stop.reason if attempt.stop.reason is not None else StopReason.TIMEOUT


def job_fields(job: Job) -> dict[str, Any]:
    """The fields of every line about `job`: a worker's, and lease recovery's."""
    return {
        "job_id": str(job.id),
        "job_type": job.type,
        "queue": job.queue,
        "attempt": job.attempts,
    }
