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
import contextlib
import contextvars
import logging
import random
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from uuid import UUID

from jobqueue.adapters.telemetry.logging import log_failure
from jobqueue.domain.attempts import Outcome
from jobqueue.domain.job import Job, Lease
from jobqueue.domain.outcome import Decision, decide
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
# Claims on their way at once. With one, the database and this process take turns: the
# process runs what a claim brought while the database idles, then waits a round trip for
# the next batch. A second claim, sent once half a batch is wanted, overlaps the two; the
# jobs it may bring count against the same prefetch bound, so no more are held.
MAX_CLAIMS_IN_FLIGHT = 2


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
        self._prefetch = Prefetch(config.workers)
        self._executor = Executor(registry, decoder, config)
        self._writer = OutcomeWriter(store, config.outcome_timeout)
        self._keeper = LeaseKeeper(
            store, self, config.lease_duration, timeout=config.outcome_timeout
        )
        self._stopping = asyncio.Event()
        self._woken = asyncio.Event()
        # Set by everything the dispatcher may act on: a worker freed, a write settled, a
        # claim returned, a wake-up, stop().
        self._nudged = asyncio.Event()
        # Claims on their way, each with the jobs it asked for (counted as held already).
        self._claims: dict[asyncio.Task[None], int] = {}
        # Until when (time.monotonic()) no claim is sent, and whether a wake-up ends the
        # rest early: after a claim came back short (nothing more due), or failed.
        self._rest: tuple[float, bool] | None = None
        # Whether the last claim to come back brought all it asked for: only then is a
        # backlog known, and a second claim worth sending beside the first. Woken from
        # idle, the job announced is most likely alone, and two claims would race for
        # its row, each with a commit (docs/design.md: pickup's tail doubled).
        self._backlog = False
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
        self._nudged.set()

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
        _log.info(
            "queue paused: claiming nothing; running jobs finish",
            extra={
                "queue": self._config.queue,
                "running": len(self._attempts),
                "given_back": given_back,
            },
        )
        self._nudged.set()

    def resume(self) -> None:
        """The queue was resumed: claim at once. Safe to call more than once."""
        if not self._paused:
            return
        self._paused = False
        _log.info("queue resumed", extra={"queue": self._config.queue})
        self._rest = None
        self.wake()

    def wake(self) -> None:
        """Work was enqueued: an idle dispatcher claims now instead of at its next poll."""
        self._woken.set()
        self._nudged.set()

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

    # --- claiming -----------------------------------------------------------------------

    async def _dispatch(self) -> None:
        try:
            while not self._stopping.is_set():
                self._nudged.clear()
                self._give_back_stale()
                wanted = min(self._wanted(), self._claim_size())
                if self._may_send(wanted):
                    self._send_claim(wanted)
                    continue
                if not self._claims:
                    # Nothing on its way to carry them: what waits for a claim is written.
                    self._writer.flush()
                    if self._rest is not None:
                        await self._rest_out(*self._rest)
                        continue
                # Bounded while jobs wait in the prefetch, so that stale ones are given back
                # in time.
                await self._nudge(at_most=PREFETCH_HOLD_SECONDS if self._ready else None)
            # Stopping: the claims on their way come back, and their jobs are given back
            # (none is sent from here on).
            await asyncio.gather(*self._claims, return_exceptions=True)
        except asyncio.CancelledError:
            await self._cancel_claims()
            raise
        self._writer.flush()

    def _claim_size(self) -> int:
        """The most one claim asks for: all the pool may hold, or half of it when claims
        go two at a time (`_overlapping`)."""
        size = self._config.workers + self._prefetch.depth
        return -(-size // MAX_CLAIMS_IN_FLIGHT) if self._overlapping() else size

    def _overlapping(self) -> bool:
        """Whether claims go out while another is on its way: when the round trip is what
        limits the pool, that is when the prefetch holds a pool's worth of jobs or more.
        Jobs that take longer than a claim are claimed one claim at a time."""
        return self._prefetch.depth >= self._config.workers

    def _may_send(self, wanted: int) -> bool:
        if wanted <= 0 or self._rest is not None or self._paused or not self._types:
            return False
        if not self._claims:
            return True
        # A second claim only under a backlog (`_backlog`), and for half a batch or
        # more: smaller ones would mostly add statements (and commits) per job.
        return (
            self._overlapping()
            and self._backlog
            and len(self._claims) < MAX_CLAIMS_IN_FLIGHT
            and wanted >= self._claim_size()
        )

    def _send_claim(self, wanted: int) -> None:
        # Cleared before the claim, so a wake() arriving while it runs is not lost.
        self._woken.clear()
        task = asyncio.create_task(self._claim_round(wanted), name="jobqueue claim")
        self._claims[task] = wanted

    async def _claim_round(self, wanted: int) -> None:
        """One claim, and the attempts for what it brought."""
        claim_started = time.time_ns()
        sent = time.monotonic()
        # The lease runs from when the statement ran, which is after this.
        lease_until = sent + self._config.lease_duration.total_seconds()
        try:
            jobs = await self._claim(wanted)
        except Exception as error:
            poll = self._config.poll_interval.total_seconds()
            log_failure(_log, "claiming jobs failed; trying again in %gs", error, poll)
            self._rest = (time.monotonic() + poll, False)
            return
        finally:
            # In the same step as the jobs join the pool below: the dispatcher never
            # sees them both requested and held.
            task = asyncio.current_task()
            assert task is not None
            del self._claims[task]
            self._nudged.set()
        self._prefetch.claimed(time.monotonic() - sent)
        self._backlog = len(jobs) >= wanted
        claimed = (claim_started, time.time_ns())
        for job in jobs:
            self._claimed(Attempt(job, job.lease, 0.0, claimed, job_fields(job), lease_until))
        if len(jobs) < wanted:
            if self._rest is None:
                # Nothing more is due: rest for the poll interval or until a wake().
                poll = self._config.poll_interval.total_seconds()
                self._rest = (time.monotonic() + poll, True)
        elif self._rest is not None and self._rest[1]:
            # A full claim that was on its way beside a short one: more may be due after
            # all, so the short one's rest is over.
            self._rest = None
        self._start_ready()

    async def _rest_out(self, until: float, wakeable: bool) -> None:
        """Wait out a rest from claiming: until `until`, a wake-up if `wakeable`, or stop."""
        left = until - time.monotonic()
        if left > 0 and not (wakeable and self._woken.is_set()):
            await self._nudge(at_most=left)
            if not (wakeable and self._woken.is_set()) and time.monotonic() < until:
                return  # nudged by something else: still resting
        self._rest = None

    async def _nudge(self, *, at_most: float | None) -> None:
        """Return once nudged, or after `at_most` seconds."""
        if at_most is None:
            await self._nudged.wait()
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(at_most):
                await self._nudged.wait()

    async def _cancel_claims(self) -> None:
        """The dispatcher is cancelled: so are the claims on their way (the outcomes they
        carry go back to the writer)."""
        tasks = list(self._claims)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _claim(self, wanted: int) -> Sequence[Job]:
        """Claim up to `wanted` jobs, carrying the outcomes waiting to be written."""
        lease, queue = self._config.lease_duration, self._config.queue
        carried = self._writer.take()
        if not carried:
            return await self._store.claim(wanted, lease, queue, types=self._types)
        context = self._writer.taken_context()
        try:
            async with asyncio.timeout(self._writer.timeout):
                writing = self._store.record_and_claim(
                    as_decided(carried), wanted, lease, queue, types=self._types
                )
                if context is None or isinstance(self._tracer, NullTracer):
                    held, jobs = await writing
                else:
                    # Traced: the statement is a span of the attempt whose ending waited
                    # first. Awaited as a task, it is cancelled with this one.
                    held, jobs = await asyncio.create_task(writing, context=context)
        except BaseException as error:
            # Cancelled too (a forced shutdown): the writer takes them back either way.
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
        running, requested = len(self._attempts), sum(self._claims.values())
        # The jobs the claims on their way may bring count as claimed already.
        ahead = len(self._ready) + requested
        if running >= workers and ahead > depth // 2:
            return 0
        # Held at most: a pool's worth running, the prefetch, and a pool's worth of
        # outcomes being written.
        return min(
            workers + depth - running - ahead, 2 * workers + depth - len(self._held) - requested
        )

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

    def _give_back_stale(self) -> None:
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
        self._nudged.set()
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
        self._nudged.set()
        job, fields, span = attempt.job, attempt.fields, attempt.span
        result = done.result()
        self._held.pop(attempt.lease, None)
        outcome = decision.outcome
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
            outcome = Outcome.LEASE_LOST
            self._observer.lease_lost(job)
        else:
            log_failure(
                _log,
                "recording outcome %s failed after %d tries; the job is left to lease recovery",
                result.error,
                outcome,
                result.tries,
                extra=fields,
            )
            outcome = Outcome.UNRECORDED
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
        """The attempt ended without an outcome to write: its job was cancelled, its lease
        was lost, or shutdown gave up on its thread."""
        self._held.pop(attempt.lease, None)
        if attempt.stop.reason is StopReason.CANCELLED:
            _log.info(
                "job finished: cancelled while it ran; its handler was stopped",
                extra={**attempt.fields, "outcome": Outcome.CANCELLED},
            )
            if attempt.span is not None:
                attempt.span.end(Outcome.CANCELLED, None)
            return
        outcome = Outcome.LEASE_LOST if attempt.lost else Outcome.ABANDONED
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
