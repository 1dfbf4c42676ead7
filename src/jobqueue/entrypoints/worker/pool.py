"""The worker pool: runs the jobs its dispatcher claims (`dispatch.py`; how many,
`claim_sizing.py`) on its free workers, each attempt under a timeout (`attempt.Executor`),
and records what the domain decides.

A worker is free again as soon as its handler returns: the outcome goes to the
`OutcomeWriter`, which batches it with the others (retried until recorded or its lease
ran out), and the worker takes the next claimed job at once. Every lease held, from the
claim until the outcome is written, is renewed by the `LeaseKeeper`; progress reports go
through the `ProgressWriter`, the last one with the outcome.

Under `asyncio.run`, Ctrl-C and SIGTERM reach the pool as cancellation or `stop()`, never
as an exception out of a handler, so a handler raising them is a bug in that handler, not
a request to stop the process.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import random
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from uuid import UUID

from jobqueue.domain.attempts import Outcome
from jobqueue.domain.flow import Claimed
from jobqueue.domain.job import Job, Lease
from jobqueue.domain.outcome import Decision, decide
from jobqueue.domain.ports import AttemptTransactions, JobStore, PayloadDecoder
from jobqueue.domain.registry import Registry, StopReason
from jobqueue.entrypoints.worker.attempt import Attempt, Executor, job_fields
from jobqueue.entrypoints.worker.claim_sizing import ClaimSizing
from jobqueue.entrypoints.worker.dispatch import PREFETCH_HOLD_SECONDS, Dispatcher
from jobqueue.entrypoints.worker.ending_report import report_left, report_written
from jobqueue.entrypoints.worker.leases import LeaseKeeper
from jobqueue.entrypoints.worker.observer import PoolObserver, guarded
from jobqueue.entrypoints.worker.outcomes import OutcomeWriter, WriteResult
from jobqueue.entrypoints.worker.pool_config import PoolConfig
from jobqueue.entrypoints.worker.progress import ProgressWriter
from jobqueue.entrypoints.worker.shutdown import stop_attempts
from jobqueue.entrypoints.worker.tracing import AttemptTracer, NullTracer
from jobqueue.entrypoints.worker.transactions import TransactionalEndings

_log = logging.getLogger("jobqueue.worker")


class WorkerPool:
    """Runs at most `config.workers` attempts at once in this process. A sync handler
    that overruns, loses its lease or outlives the shutdown's grace keeps its slot and
    its lease until its thread returns (`attempt.Executor`): the process never claims
    past its capacity nor lets the job run again while the thread runs."""

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
        transactions: AttemptTransactions | None = None,
    ) -> None:
        self._store = store
        self._registry = registry
        self._decoder = decoder
        self._config = config
        # What this pool claims: only the types this process has handlers for (read from
        # the registry as `run` starts, once every handler is declared).
        self._types: frozenset[str] = frozenset()
        self._observer = guarded(observer)
        self._tracer = tracer if tracer is not None else NullTracer()
        self._rand = rand
        # Running attempts, each holding a worker.
        self._attempts: dict[asyncio.Task[None], Attempt] = {}
        # Claimed ahead of need, in claim order, waiting for a worker.
        self._ready: deque[Attempt] = deque()
        # Every lease held, from the claim until its outcome is written or given up.
        self._held: dict[Lease, Attempt] = {}
        # Outcome writes not settled yet; shutdown waits for them.
        self._recording: set[asyncio.Future[WriteResult]] = set()
        self._sizing = ClaimSizing(config.workers)
        self._progress = ProgressWriter(store, config.outcome_timeout)
        self._writer = OutcomeWriter(store, config.outcome_timeout)
        self._endings = TransactionalEndings(self._writer, transactions, config.outcome_timeout)
        self._executor = Executor(
            registry, decoder, config, self._progress, self._endings, store.dependency_results
        )
        self._keeper = LeaseKeeper(
            store, self, config.lease_duration, timeout=config.outcome_timeout
        )
        self._stopping = asyncio.Event()
        self._dispatcher = Dispatcher(
            self,
            self._writer,
            self._sizing,
            self._claim,
            lease_seconds=config.lease_duration.total_seconds(),
            poll_seconds=config.poll_interval.total_seconds(),
        )
        # While the queue is paused (`pause()`): nothing is claimed, and a job a claim
        # brings anyway (sent before the pause) is given back; running attempts finish.
        self._paused = False

    @property
    def in_flight(self) -> int:
        """Attempts running now, each holding a worker (neither jobs claimed ahead of need
        nor outcome writes count)."""
        return len(self._attempts)

    @property
    def claimed_ahead(self) -> int:
        """Jobs claimed ahead of need, waiting for a worker (see `prefetch`)."""
        return len(self._ready)

    def stop(self) -> None:
        """Stop claiming and begin the graceful shutdown; safe to call more than once."""
        self._stopping.set()
        self._dispatcher.stop()

    @property
    def queue(self) -> str:
        return self._config.queue

    @property
    def paused(self) -> bool:
        return self._paused

    def pause(self) -> None:
        """The queue was paused: claim nothing more, and give back the jobs claimed ahead,
        which have not started; running attempts finish. Safe to call more than once."""
        if self._paused:
            return
        self._paused = True
        given_back = self._give_back_ready()
        running = len(self._attempts)
        _log.info(
            "queue paused: claiming nothing; running jobs finish",
            extra={"queue": self._config.queue, "running": running, "given_back": given_back},
        )
        self._dispatcher.nudge()

    def resume(self) -> None:
        """The queue was resumed: claim at once. Safe to call more than once."""
        if not self._paused:
            return
        self._paused = False
        _log.info("queue resumed", extra={"queue": self._config.queue})
        self._dispatcher.end_rest()
        self.wake()

    def wake(self) -> None:
        """Work was enqueued: an idle dispatcher claims now instead of at its next poll."""
        self._dispatcher.wake()

    async def run(self) -> None:
        """Claim and run jobs until `stop()`, then drain; call once.

        Returns when every attempt has ended and its outcome write has finished or timed
        out. Running attempts get `shutdown_timeout` to finish; then they are cancelled
        and their jobs released, giving the attempt back. Cancelling `run()` itself,
        before or during that grace period, cancels the attempts at once, but still
        waits for their releases before re-raising.
        """
        self._types = frozenset(self._registry)
        if not self._types:
            _log.warning(
                "no job type has a handler in this process: it claims nothing from queue %s",
                self._config.queue,
            )
        keeper = asyncio.create_task(self._keeper.run(), name="jobqueue lease renewal")
        try:
            await self._dispatcher.run()
            await self._drain(grace=self._config.shutdown_timeout.total_seconds())
        except asyncio.CancelledError:
            self._stopping.set()
            await self._drain(grace=0.0)
            raise
        finally:
            # Renewing until every outcome is written: a long drain keeps its leases.
            self._keeper.stop()
            await asyncio.gather(keeper, return_exceptions=True)
            await self._progress.aclose()

    # --- leases (the keeper's LeaseHolder) ------------------------------------------------

    def held(self) -> Mapping[Lease, float]:
        return {lease: attempt.lease_until for lease, attempt in self._held.items()}

    def renewed(self, leases: set[Lease], until: float) -> None:
        for lease in leases:
            attempt = self._held.get(lease)
            if attempt is not None:
                attempt.lease_until = until

    def lost(self, lease: Lease) -> bool:
        attempt = self._held.get(lease)
        if attempt is None or attempt.recording:
            # Already written, or being written: the write's own answer says whether the
            # lease still held the job (a renewal racing a write always misses its row).
            return False
        self._observer.lease_lost(attempt.job)
        self._stop_held(attempt, StopReason.LEASE_LOST)
        return True

    def cancelled(self, job_id: UUID) -> bool:
        """An operator cancelled the job `job_id`: if this pool holds it, stop its attempt
        (the cancel ended the job already: nothing is written for it). Return whether it
        held the job."""
        attempt = next((a for a in self._held.values() if a.job.id == job_id), None)
        if attempt is None or attempt.recording:
            # Not here, or its ending is being written (and is fenced out by the cancel).
            return False
        self._observer.attempt_cancelled(attempt.job)
        self._stop_held(attempt, StopReason.CANCELLED)
        return True

    def _stop_held(self, attempt: Attempt, reason: StopReason) -> None:
        """The attempt's lease is gone (`reason` says how): stop it, write nothing for it."""
        del self._held[attempt.lease]
        attempt.lost = True
        if attempt.task is None:
            # Claimed ahead and never started: nothing runs, nothing to write.
            self._ready.remove(attempt)
            return
        attempt.stop.request(reason)
        if not attempt.task.done():
            # Stopped at once: another process may already be running the job.
            attempt.task.cancel()

    # --- claiming (the dispatcher's `Claiming`) --------------------------------------------

    def may_claim(self) -> bool:
        return not self._paused and bool(self._types)

    def wanted(self, requested: int) -> int:
        return self._sizing.wanted(
            running=len(self._attempts),
            ready=len(self._ready),
            requested=requested,
            held=len(self._held),
        )

    def holds_ready(self) -> bool:
        return bool(self._ready)

    def claimed(self, jobs: Sequence[Job], claimed: tuple[int, int], lease_until: float) -> None:
        for job in jobs:
            self._claimed(Attempt(job, job.lease, 0.0, claimed, job_fields(job), lease_until))
        self._start_ready()

    async def _claim(self, wanted: int) -> Claimed:
        """Claim up to `wanted` jobs, carrying the outcomes waiting to be written."""
        config, traced = self._config, not isinstance(self._tracer, NullTracer)
        claimed = await self._writer.claim(
            wanted, config.lease_duration, config.queue, self._types, traced=traced
        )
        if claimed.held_back:
            self._observer.claim_held_back(config.queue, claimed.held_back)
        return claimed

    def _claimed(self, attempt: Attempt) -> None:
        self._held[attempt.lease] = attempt
        if self._stopping.is_set() or self._paused:
            # Claimed while stop() or pause() was called: give it back at once rather
            # than begin work the shutdown may have to interrupt, or the pause forbids.
            self._record(attempt, Decision.release(), 0.0, observe=False)
            return
        self._ready.append(attempt)

    def _start_ready(self) -> None:
        """Give every free worker its next claimed job."""
        if self._stopping.is_set():
            return  # shutdown gives them back
        while self._ready and len(self._attempts) < self._config.workers:
            attempt = self._ready.popleft()
            attempt.started = time.monotonic()
            task = asyncio.create_task(
                self._run_attempt(attempt), name=f"jobqueue job {attempt.job.id}"
            )
            self._attempts[task] = attempt
            attempt.task = task
            task.add_done_callback(self._attempt_ended)

    def give_back_stale(self) -> None:
        """Release jobs claimed ahead that no worker took in time: the prefetch guessed
        wrong, and another process may be free to run them now."""
        if not self._ready:
            return
        oldest = time.time_ns() - int(PREFETCH_HOLD_SECONDS * 1e9)
        while self._ready and self._ready[0].claimed[1] < oldest:
            self._record(self._ready.popleft(), Decision.release(), 0.0, observe=False)

    def _give_back_ready(self) -> int:
        """Release every job claimed ahead (none has started); return how many."""
        count = len(self._ready)
        while self._ready:
            self._record(self._ready.popleft(), Decision.release(), 0.0, observe=False)
        return count

    def _attempt_ended(self, task: asyncio.Task[None]) -> None:
        attempt = self._attempts.pop(task)
        self._start_ready()
        self._dispatcher.attempt_ended()
        if task.cancelled():
            if not attempt.recording and not attempt.lost:
                # Cancelled before its first step (shutdown right after the claim): the
                # handler never ran, so the job is given back like any interrupted one.
                self._record(attempt, Decision.release(), 0.0, observe=False)
            return
        error = task.exception()
        if error is not None:
            if not attempt.recording:
                # Renewed no more: the lease runs out and recovery takes the job.
                self._held.pop(attempt.lease, None)
            if attempt.span is not None and not attempt.recording:
                attempt.span.end(Outcome.UNRECORDED, f"{type(error).__name__}: {error}")
            _log.error(
                "attempt failed inside the worker; the job stays processing until its "
                "lease expires",
                exc_info=error,
                extra=attempt.fields,
            )

    # --- shutdown ---------------------------------------------------------------------------

    async def _drain(self, grace: float) -> None:
        # Claimed ahead and never started: given back first, for other processes to run.
        self._give_back_ready()
        await stop_attempts(self._attempts, grace, self._config.outcome_timeout)
        while self._recording:
            await asyncio.wait(set(self._recording))
        await self._writer.idle()
        await self._endings.idle()

    # --- one attempt ----------------------------------------------------------------------

    async def _run_attempt(self, attempt: Attempt) -> None:
        job = attempt.job
        span = attempt.span = self._tracer.start(job, *attempt.claimed)
        # Everything from here on, the outcome write's task included, runs with the
        # attempt's span current: the handler's spans and log lines belong to it.
        with span.activate():
            _log.info("job started", extra=attempt.fields)
            self._observer.attempt_started(job)
            ending = await self._executor.run(attempt, span)
            duration = time.monotonic() - attempt.started
            self._sizing.prefetch.ran(duration)
            if attempt.lost or attempt.abandoned:
                self._left(attempt)
                return
            backoff = self._registry.backoff_for(job.type) or self._config.backoff
            decision = decide(job, ending, backoff, self._rand, self._config.max_snoozes)
            # Nothing awaited from here on: the attempt ends, freeing its worker, while
            # the write goes on without it.
            self._record(attempt, decision, duration)

    # --- recording the outcome --------------------------------------------------------------

    def _record(
        self, attempt: Attempt, decision: Decision, duration: float, *, observe: bool = True
    ) -> None:
        attempt.recording = True
        decision = decision.with_progress(self._progress.take(attempt.lease))
        # Tried until the lease runs out, and at most one lease from now: were renewals to
        # go through while writes keep failing, the job still goes to recovery in time.
        give_up_at = time.monotonic() + self._config.lease_duration.total_seconds()
        done = self._endings.write(
            attempt.lease, decision, lambda: min(attempt.lease_until, give_up_at)
        )
        self._recording.add(done)
        # Settled in the attempt's context, so that its span is current for what follows.
        done.add_done_callback(
            partial(self._written, attempt, decision, duration, observe),
            context=contextvars.copy_context(),
        )

    def _written(
        self,
        attempt: Attempt,
        decision: Decision,
        duration: float,
        observe: bool,
        done: asyncio.Future[WriteResult],
    ) -> None:
        self._recording.discard(done)
        # A write that settles may let a pool whose writes lagged claim again.
        self._dispatcher.nudge()
        self._held.pop(attempt.lease, None)
        report_written(attempt, decision, duration, done.result(), self._observer, observe=observe)

    def _left(self, attempt: Attempt) -> None:
        """The attempt ended without an outcome to write (`report_left` says why)."""
        self._held.pop(attempt.lease, None)
        self._endings.abandon(attempt.lease)
        report_left(attempt)
