"""The worker pool: claims jobs only when a worker is free for them, runs each attempt
under a timeout, and records what the domain decides with one fenced store write.

Handlers are user code, and none of what they do may kill the pool. Every exception
escaping a handler, including `SystemExit`, `KeyboardInterrupt` and a `CancelledError`
the handler raised on its own, is logged with its traceback and becomes a retryable
failure (unless `is_permanent` says otherwise). Under `asyncio.run`, Ctrl-C and SIGTERM
reach the pool as cancellation or `stop()`, never as an exception out of a handler, so
a handler raising them is a bug in that handler, not a request to stop the process.
Only cancellation of the attempt by the pool itself (shutdown) is treated as one.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import random
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from jobqueue.domain.errors import LeaseLost, is_permanent, retry_after
from jobqueue.domain.job import Job
from jobqueue.domain.outcome import (
    Decision,
    Ending,
    Errored,
    Interrupted,
    Outcome,
    Succeeded,
    TimedOut,
    decide,
)
from jobqueue.domain.ports import JobStore, PayloadDecoder
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.entrypoints.worker.completer import Completer
from jobqueue.entrypoints.worker.observer import PoolObserver, guarded
from jobqueue.entrypoints.worker.pool_config import PoolConfig
from jobqueue.entrypoints.worker.tracing import AttemptSpan, AttemptTracer, NullTracer

_log = logging.getLogger("jobqueue.worker")
# Handlers log through `ctx.logger`, an adapter on this logger carrying the job's fields.
_handler_log = logging.getLogger("jobqueue.jobs")


@dataclass(slots=True, eq=False)
class _Attempt:
    job: Job
    started: float  # time.monotonic()
    # When the claim that returned the job ran (time.time_ns()), for its trace.
    claimed: tuple[int, int]
    # The job's log fields, built once for every line the attempt logs.
    fields: dict[str, Any]
    # Set once the outcome write has its own task; from then on cancelling the attempt
    # cannot lose the outcome.
    recording: bool = False
    span: AttemptSpan | None = None


class WorkerPool:
    """Runs at most `config.workers` attempts at once in this process.

    Synchronous handlers run in a thread of the pool's own (one per worker) and cannot
    be cancelled:
    when one overruns `job_timeout`, or is still running when shutdown gives up on it,
    the attempt is recorded as timed out (or released) and its slot freed, but the
    thread runs on until the function returns, possibly while the job runs again
    elsewhere. Handlers must be idempotent for this reason, as for at-least-once
    delivery in general.
    """

    def __init__(
        self,
        store: JobStore,
        registry: Registry,
        decoder: PayloadDecoder,
        config: PoolConfig,
        *,
        observer: PoolObserver | None = None,
        tracer: AttemptTracer | None = None,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self._store = store
        self._registry = registry
        self._decoder = decoder
        self._config = config
        self._observer = guarded(observer)
        self._tracer = tracer if tracer is not None else NullTracer()
        self._rand = rand
        self._attempts: dict[asyncio.Task[None], _Attempt] = {}
        self._writes: set[asyncio.Task[None]] = set()
        self._completer = Completer(store, config.outcome_timeout)
        self._stopping = asyncio.Event()
        self._woken = asyncio.Event()
        self._slot_freed = asyncio.Event()
        # One thread per worker slot: sync handlers never queue behind each other (the
        # default executor is sized by CPU count) and never starve other thread users.
        self._threads = ThreadPoolExecutor(config.workers, thread_name_prefix="jobqueue-job")

    @property
    def in_flight(self) -> int:
        """Attempts running now, their outcome writes included."""
        return len(self._attempts)

    def stop(self) -> None:
        """Stop claiming and begin the graceful shutdown; safe to call more than once."""
        self._stopping.set()

    def wake(self) -> None:
        """Work was enqueued: an idle dispatcher claims now instead of at its next poll."""
        self._woken.set()

    async def run(self) -> None:
        """Claim and run jobs until `stop()`, then drain; call once.

        Returns when every attempt has ended and its outcome write has finished or timed
        out. Running attempts get `shutdown_timeout` to finish; then they are cancelled
        and their jobs released, giving the attempt back. Cancelling `run()` itself,
        before or during that grace period, cancels the attempts at once, but still
        waits for their releases before re-raising.
        """
        self._config.warn_if_lease_is_short(_log)
        try:
            await self._dispatch()
            await self._drain(grace=self._config.shutdown_timeout.total_seconds())
        except asyncio.CancelledError:
            self._stopping.set()
            await self._drain(grace=0.0)
            raise
        finally:
            # A sync handler that outlived its attempt cannot be stopped; do not wait for it.
            self._threads.shutdown(wait=False, cancel_futures=True)

    # --- claiming -----------------------------------------------------------------------

    async def _dispatch(self) -> None:
        poll = self._config.poll_interval.total_seconds()
        while not self._stopping.is_set():
            self._slot_freed.clear()
            free = self._config.workers - len(self._attempts)
            if free <= 0:
                await _first_of(self._slot_freed, self._stopping)
                continue
            # Cleared before the claim, so a wake() arriving while it runs is not lost.
            self._woken.clear()
            claim_started = time.time_ns()
            try:
                jobs = await self._store.claim(free, self._config.lease_duration)
            except Exception:
                _log.exception("claiming jobs failed; trying again in %gs", poll)
                await _first_of(self._stopping, at_most=poll)
                continue
            claimed = (claim_started, time.time_ns())
            for job in jobs:
                self._start(job, claimed)
            # Let the attempts just created take their first step before this loop goes
            # on: when slots freed up during the claim, the next claim would otherwise
            # go out while the jobs of this one still wait to begin.
            await asyncio.sleep(0)
            if len(jobs) < free:
                # Nothing more is due: wait for the poll interval or an enqueue's wake().
                await _first_of(self._woken, self._stopping, at_most=poll)

    def _start(self, job: Job, claimed: tuple[int, int]) -> None:
        attempt = _Attempt(job, time.monotonic(), claimed, _job_fields(job))
        if self._stopping.is_set():
            # Claimed while stop() was called: give it back at once rather than begin
            # work the shutdown may have to interrupt.
            self._record(attempt, Decision.release(), 0.0, observe=False)
            return
        task = asyncio.create_task(self._run_attempt(attempt), name=f"jobqueue job {job.id}")
        self._attempts[task] = attempt
        task.add_done_callback(self._attempt_ended)

    def _attempt_ended(self, task: asyncio.Task[None]) -> None:
        attempt = self._attempts.pop(task)
        self._slot_freed.set()
        if task.cancelled():
            if not attempt.recording:
                # Cancelled before its first step (shutdown right after the claim): the
                # handler never ran, so the job is given back like any interrupted one.
                self._record(attempt, Decision.release(), 0.0, observe=False)
            return
        error = task.exception()
        if error is not None:
            if attempt.span is not None and not attempt.recording:
                attempt.span.end("unrecorded", f"{type(error).__name__}: {error}")
            _log.error(
                "attempt failed inside the worker; the job stays processing until its "
                "lease expires",
                exc_info=error,
                extra=attempt.fields,
            )

    # --- shutdown ---------------------------------------------------------------------------

    async def _drain(self, grace: float) -> None:
        running = set(self._attempts)
        if running and grace > 0:
            _log.info("stopping: waiting up to %gs for %d running attempts", grace, len(running))
            _, running = await asyncio.wait(running, timeout=grace)
        if running:
            _log.warning("cancelling %d attempts still running at shutdown", len(running))
            for task in running:
                task.cancel()
            # A cancelled attempt only records its release; one that takes longer than
            # a write may is a handler ignoring cancellation, and is left to recovery.
            _, stuck = await asyncio.wait(
                running, timeout=self._config.outcome_timeout.total_seconds()
            )
            if stuck:
                _log.error(
                    "%d attempts ignored cancellation; their jobs will be recovered when "
                    "their leases expire",
                    len(stuck),
                )
        while self._writes:
            await asyncio.wait(set(self._writes))
        # A write that timed out stopped waiting for its batch; the batch may still land.
        await self._completer.idle()

    # --- one attempt ----------------------------------------------------------------------

    async def _run_attempt(self, attempt: _Attempt) -> None:
        job = attempt.job
        span = attempt.span = self._tracer.start(job, *attempt.claimed)
        # Everything from here on, the outcome write's task included, runs with the
        # attempt's span current: the handler's spans and log lines belong to it.
        with span.activate():
            _log.info("job started", extra=attempt.fields)
            self._observer.attempt_started(job)
            ending = await self._execute(attempt, span)
            decision = decide(job, ending, self._config.backoff, self._rand)
            write = self._record(attempt, decision, time.monotonic() - attempt.started)
            # Shielded: a shutdown cancelling the attempt now must not lose its result.
            await asyncio.shield(write)

    async def _execute(self, attempt: _Attempt, span: AttemptSpan) -> Ending:
        limit = self._config.job_timeout
        deadline = asyncio.timeout(limit.total_seconds())
        try:
            async with deadline:
                await self._invoke(attempt)
        except asyncio.CancelledError as error:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                # Only the pool cancels attempts, and only to shut down.
                task.uncancel()
                return Interrupted()
            return self._errored(attempt, error, span)
        except BaseException as error:
            if isinstance(error, TimeoutError) and deadline.expired():
                _log.warning("job timed out", extra=attempt.fields)
                return TimedOut(limit)
            return self._errored(attempt, error, span)
        return Succeeded()

    async def _invoke(self, attempt: _Attempt) -> None:
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
            deadline=datetime.now(UTC) + self._config.job_timeout,
            # A copy: the handler may change its adapter's fields, not the pool's.
            logger=logging.LoggerAdapter(_handler_log, dict(attempt.fields)),
        )
        if spec.is_async:
            pending = spec.func(context, payload)
            if pending is not None:
                await pending
        else:
            # The copied context carries the attempt's log fields and trace span into
            # the thread, as asyncio.to_thread would.
            call = contextvars.copy_context().run
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(self._threads, call, spec.func, context, payload)

    def _errored(self, attempt: _Attempt, error: BaseException, span: AttemptSpan) -> Errored:
        _log.error("job raised %s", type(error).__name__, exc_info=error, extra=attempt.fields)
        span.record_error(error)
        return Errored(
            f"{type(error).__name__}: {error}",
            permanent=is_permanent(error),
            retry_after=retry_after(error),
        )

    # --- recording the outcome --------------------------------------------------------------

    def _record(
        self, attempt: _Attempt, decision: Decision, duration: float, *, observe: bool = True
    ) -> asyncio.Task[None]:
        attempt.recording = True
        task = asyncio.create_task(self._write(attempt, decision, duration, observe))
        # Kept here, not only by the attempt, so that shutdown waits for it even when
        # the attempt awaiting it was cancelled.
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)
        return task

    async def _write(
        self, attempt: _Attempt, decision: Decision, duration: float, observe: bool
    ) -> None:
        job, fields, span = attempt.job, attempt.fields, attempt.span
        outcome: str = decision.outcome
        try:
            async with asyncio.timeout(self._config.outcome_timeout.total_seconds()):
                await self._apply(job, decision)
        except LeaseLost:
            _log.warning(
                "lease lost: the job was recovered or claimed again; outcome %s dropped",
                outcome,
                extra=fields,
            )
            outcome = "lease_lost"
            self._observer.lease_lost(job)
        except Exception:
            _log.exception(
                "recording outcome %s failed; the job stays processing until its lease expires",
                outcome,
                extra=fields,
            )
            outcome = "unrecorded"
        else:
            if observe:
                self._observer.attempt_finished(job, decision, duration)
        if _log.isEnabledFor(logging.INFO):
            _log.info(
                "job finished",
                extra={
                    **fields,
                    "outcome": outcome,
                    "duration_ms": duration * 1000,
                    "error": decision.error,
                    "retry_in": _retry_in(decision),
                },
            )
        if span is not None:
            span.end(outcome, decision.error)

    async def _apply(self, job: Job, decision: Decision) -> None:
        lease = job.lease
        if decision.outcome is Outcome.COMPLETED:
            # Batched with other attempts' completions, each still fenced by its lease.
            if not await self._completer.complete(lease):
                raise LeaseLost(lease.job_id, lease.token)
            return
        await self._store.record(lease, decision)


def _retry_in(decision: Decision) -> float | None:
    # Seconds until the job is due again: the backoff of a retry, 0 for a release.
    return None if decision.delay is None else decision.delay.total_seconds()


def _job_fields(job: Job) -> dict[str, Any]:
    return {"job_id": str(job.id), "job_type": job.type, "attempt": job.attempts}


async def _first_of(*events: asyncio.Event, at_most: float | None = None) -> None:
    """Return once any of `events` is set, or after `at_most` seconds."""
    if any(event.is_set() for event in events):
        return
    waiters = [asyncio.create_task(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, timeout=at_most, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
