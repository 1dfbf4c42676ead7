"""The worker pool: claims jobs for its free workers (and a few ahead of need, see
`prefetch`), runs each attempt (`attempt.Executor`) under a timeout, and records what the
domain decides.

A worker is free again as soon as its handler returns: the outcome goes to the
`OutcomeWriter`, which batches it with the others, and the worker takes the next claimed
job at once, without waiting for the write's round trip.

Under `asyncio.run`, Ctrl-C and SIGTERM reach the pool as cancellation or `stop()`, never
as an exception out of a handler, so a handler raising them is a bug in that handler, not
a request to stop the process.

Every lease the pool holds, from the claim until the outcome is written, is renewed by
its `LeaseKeeper`; every outcome goes through its `OutcomeWriter`, retried until
recorded or its lease has run out.
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

from jobqueue.domain.job import Job, Lease
from jobqueue.domain.outcome import (
    Decision,
    decide,
)
from jobqueue.domain.ports import JobStore, PayloadDecoder
from jobqueue.domain.registry import Registry, StopReason
from jobqueue.entrypoints.worker.attempt import Attempt, Executor, job_fields
from jobqueue.entrypoints.worker.leases import LeaseKeeper
from jobqueue.entrypoints.worker.observer import PoolObserver, guarded
from jobqueue.entrypoints.worker.outcomes import OutcomeWriter, WriteResult, Written, as_decided
from jobqueue.entrypoints.worker.pool_config import PoolConfig
from jobqueue.entrypoints.worker.prefetch import Prefetch
from jobqueue.entrypoints.worker.tracing import AttemptTracer, NullTracer

_log = logging.getLogger("jobqueue.worker")

# A job claimed ahead of need that no worker has taken after this long (the running jobs
# turned out longer than the prefetch expected) is given back for another process to run.
PREFETCH_HOLD_SECONDS = 1.0


class WorkerPool:
    """Runs at most `config.workers` attempts at once in this process.

    Synchronous handlers run in a thread of their own and cannot be cancelled. When one
    overruns `job_timeout`, loses its lease or is still running at shutdown, its
    `ctx.stop` is set and the attempt keeps its slot and its job's lease until the
    function returns; only then is the ending recorded (timed out, released), so this
    process never claims past its capacity nor lets the job run again while the thread
    runs. Shutdown waits `outcome_timeout` for such a thread after asking it to stop;
    past that the job is left to lease recovery, never released.
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
        # Running attempts, each holding a worker.
        self._attempts: dict[asyncio.Task[None], Attempt] = {}
        # Claimed ahead of need, in claim order, waiting for a worker.
        self._ready: deque[Attempt] = deque()
        # Every lease held, from the claim until its outcome is written or given up.
        self._held: dict[Lease, Attempt] = {}
        # Outcome writes not settled yet; shutdown waits for them.
        self._recording: set[asyncio.Future[WriteResult]] = set()
        self._prefetch = Prefetch(config.workers)
        self._executor = Executor(registry, decoder, config)
        self._writer = OutcomeWriter(store, config.outcome_timeout)
        self._keeper = LeaseKeeper(
            store, self, config.lease_duration, timeout=config.outcome_timeout
        )
        self._stopping = asyncio.Event()
        self._woken = asyncio.Event()
        self._slot_freed = asyncio.Event()

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
        keeper = asyncio.create_task(self._keeper.run(), name="jobqueue lease renewal")
        try:
            await self._dispatch()
            await self._drain(grace=self._config.shutdown_timeout.total_seconds())
        except asyncio.CancelledError:
            self._stopping.set()
            await self._drain(grace=0.0)
            raise
        finally:
            # Renewing until every outcome is written: a long drain keeps its leases.
            self._keeper.stop()
            await asyncio.gather(keeper, return_exceptions=True)

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
        del self._held[lease]
        attempt.lost = True
        self._observer.lease_lost(attempt.job)
        if attempt.task is None:
            # Claimed ahead and never started: nothing runs, nothing to write.
            self._ready.remove(attempt)
            return True
        attempt.stop.request(StopReason.LEASE_LOST)
        if not attempt.task.done():
            # Stopped at once: another process may already be running the job.
            attempt.task.cancel()
        return True

    # --- claiming -----------------------------------------------------------------------

    async def _dispatch(self) -> None:
        poll = self._config.poll_interval.total_seconds()
        while not self._stopping.is_set():
            self._slot_freed.clear()
            self._give_back_stale()
            wanted = self._wanted()
            if wanted <= 0:
                # Woken by a worker freed or a write settled; bounded while jobs wait in
                # the prefetch, so that stale ones are given back in time.
                hold = PREFETCH_HOLD_SECONDS if self._ready else None
                self._writer.flush()
                await _first_of(self._slot_freed, self._stopping, at_most=hold)
                continue
            # Cleared before the claim, so a wake() arriving while it runs is not lost.
            self._woken.clear()
            claim_started = time.time_ns()
            sent = time.monotonic()
            # The lease runs from when the statement ran, which is after this.
            lease_until = sent + self._config.lease_duration.total_seconds()
            try:
                jobs = await self._claim(wanted)
            except Exception:
                _log.exception("claiming jobs failed; trying again in %gs", poll)
                self._writer.flush()
                await _first_of(self._stopping, at_most=poll)
                continue
            self._prefetch.claimed(time.monotonic() - sent)
            claimed = (claim_started, time.time_ns())
            for job in jobs:
                self._claimed(Attempt(job, job.lease, 0.0, claimed, job_fields(job), lease_until))
            self._start_ready()
            # Let the attempts just started take their first step before this loop goes
            # on: when workers freed up during the claim, the next claim would otherwise
            # go out while the jobs of this one still wait to begin.
            await asyncio.sleep(0)
            if len(jobs) < wanted:
                # Nothing more is due: wait for the poll interval or an enqueue's wake().
                self._writer.flush()
                await _first_of(self._woken, self._stopping, at_most=poll)
        self._writer.flush()

    async def _claim(self, wanted: int) -> Sequence[Job]:
        """Claim up to `wanted` jobs, carrying the outcomes waiting to be written."""
        lease = self._config.lease_duration
        carried = self._writer.take()
        if not carried:
            return await self._store.claim(wanted, lease)
        try:
            async with asyncio.timeout(self._writer.timeout):
                held, jobs = await self._store.record_and_claim(as_decided(carried), wanted, lease)
        except Exception as error:
            self._writer.carry_failed(carried, error)
            raise
        self._writer.carried(carried, held)
        return jobs

    def _wanted(self) -> int:
        """How many jobs to claim now: enough for every free worker and the prefetch.

        While every worker is busy, the next claim waits until the prefetch is half used,
        so that claims come in batches rather than one per finished job. Outcomes not yet
        written count too: a pool whose writes lag (the database slow or away) claims no
        more than it can record.
        """
        workers = self._config.workers
        depth = self._prefetch.depth
        running, ready = len(self._attempts), len(self._ready)
        if running >= workers and ready > depth // 2:
            return 0
        # Held at most: a pool's worth running, the prefetch, and a pool's worth of
        # outcomes being written.
        return min(workers + depth - running - ready, 2 * workers + depth - len(self._held))

    def _claimed(self, attempt: Attempt) -> None:
        self._held[attempt.lease] = attempt
        if self._stopping.is_set():
            # Claimed while stop() was called: give it back at once rather than begin
            # work the shutdown may have to interrupt.
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

    def _give_back_stale(self) -> None:
        """Release jobs claimed ahead that no worker took in time: the prefetch guessed
        wrong, and another process may be free to run them now."""
        if not self._ready:
            return
        oldest = time.time_ns() - int(PREFETCH_HOLD_SECONDS * 1e9)
        while self._ready and self._ready[0].claimed[1] < oldest:
            self._record(self._ready.popleft(), Decision.release(), 0.0, observe=False)

    def _attempt_ended(self, task: asyncio.Task[None]) -> None:
        attempt = self._attempts.pop(task)
        self._start_ready()
        self._slot_freed.set()
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
                attempt.span.end("unrecorded", f"{type(error).__name__}: {error}")
            _log.error(
                "attempt failed inside the worker; the job stays processing until its "
                "lease expires",
                exc_info=error,
                extra=attempt.fields,
            )

    # --- shutdown ---------------------------------------------------------------------------

    async def _drain(self, grace: float) -> None:
        # Claimed ahead and never started: given back first, for other processes to run.
        while self._ready:
            self._record(self._ready.popleft(), Decision.release(), 0.0, observe=False)
        running = set(self._attempts)
        if running and grace > 0:
            _log.info("stopping: waiting up to %gs for %d running attempts", grace, len(running))
            _, running = await asyncio.wait(running, timeout=grace)
        if running:
            _log.warning("cancelling %d attempts still running at shutdown", len(running))
            for task in running:
                attempt = self._attempts[task]
                attempt.given_up = True
                attempt.stop.request(StopReason.SHUTDOWN)
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
        while self._recording:
            await asyncio.wait(set(self._recording))
        await self._writer.idle()

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
            self._prefetch.ran(duration)
            if attempt.lost or attempt.abandoned:
                self._left(attempt)
                return
            decision = decide(job, ending, self._config.backoff, self._rand)
            # Nothing awaited from here on: the attempt ends, freeing its worker, while
            # the write goes on without it.
            self._record(attempt, decision, duration)

    # --- recording the outcome --------------------------------------------------------------

    def _record(
        self, attempt: Attempt, decision: Decision, duration: float, *, observe: bool = True
    ) -> None:
        attempt.recording = True
        # Tried until the lease runs out, and at most one lease from now: were renewals to
        # go through while writes keep failing, the job still goes to recovery in time.
        give_up_at = time.monotonic() + self._config.lease_duration.total_seconds()
        done = self._writer.write(
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
        self._slot_freed.set()
        job, fields, span = attempt.job, attempt.fields, attempt.span
        result = done.result()
        self._held.pop(attempt.lease, None)
        outcome: str = decision.outcome
        if result.written is Written.RECORDED:
            if observe:
                self._observer.attempt_finished(job, decision, duration)
            if result.tries > 1:
                self._observer.outcome_retried(job, result.tries)
        elif result.written is Written.LEASE_LOST:
            _log.warning(
                "lease lost: the job was recovered or claimed again; outcome %s dropped",
                outcome,
                extra=fields,
            )
            outcome = "lease_lost"
            self._observer.lease_lost(job)
        else:
            _log.error(
                "recording outcome %s failed after %d tries; the job is left to lease recovery",
                outcome,
                result.tries,
                exc_info=result.error,
                extra=fields,
            )
            outcome = "unrecorded"
            self._observer.outcome_unrecorded(job)
        if _log.isEnabledFor(logging.INFO):
            _log.info(
                "job finished",
                extra={
                    **fields,
                    "outcome": outcome,
                    "duration_ms": duration * 1000,
                    "error": decision.error,
                    "retry_in": _retry_in(decision),
                    "tries": result.tries,
                },
            )
        if span is not None:
            span.end(outcome, decision.error)

    def _left(self, attempt: Attempt) -> None:
        """The attempt ended without an outcome to write: its lease was lost, or shutdown
        gave up on its thread."""
        self._held.pop(attempt.lease, None)
        outcome = "lease_lost" if attempt.lost else "abandoned"
        _log.warning(
            "job finished without an outcome: %s",
            "its lease was lost"
            if attempt.lost
            else "its thread still runs at shutdown; the job is left to lease recovery",
            extra={**attempt.fields, "outcome": outcome},
        )
        if attempt.span is not None:
            attempt.span.end(outcome, None)


def _retry_in(decision: Decision) -> float | None:
    # Seconds until the job is due again: the backoff of a retry, 0 for a release.
    return None if decision.delay is None else decision.delay.total_seconds()


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
