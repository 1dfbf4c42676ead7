"""Outcome writes: every ending of every attempt through one batched, fenced statement,
retried until it is recorded or the lease it belongs to runs out.

The batch forms by itself, like a group commit: an ending arriving while no write is in
flight goes out on the next turn of the event loop, together with whatever ended in the
same turn, so an idle pool adds no delay; endings arriving while a write is in flight go
out together in the next one.

A busy pool claims again as often as it writes, so its claims carry the endings
(`JobStore.record_and_claim`): one statement and one commit instead of two. While a
claim is on its way (between `take` and `flush`), endings wait for the next claim instead
of starting a write of their own; the pool flushes before it waits for anything, so an
ending never waits longer than the claim loop's next turn.

A write that fails for a transient reason (the database restarting, a connection
killed, a statement timed out) is tried again with jittered backoff, the whole batch at
once, for as long as each ending's lease may still be held: an attempt whose handler
finished during a database blip is recorded when the database returns, and is not run
again by recovery. Only when its lease has run out is an ending given up, and its job
left to lease recovery, which counts the attempt.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import random
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import timedelta
from enum import Enum, auto

from jobqueue.domain.backoff import Backoff
from jobqueue.domain.errors import StoreUnavailable
from jobqueue.domain.flow import Claimed
from jobqueue.domain.job import Lease
from jobqueue.domain.outcome import Decision
from jobqueue.domain.ports import JobStore

_log = logging.getLogger("jobqueue.worker")

# Bounds one statement's size (six arrays of this many elements), not the wait.
MAX_ENDINGS_PER_WRITE = 500
# Between tries of a failed write: quick enough to catch a blip, spread so that many
# processes coming back together do not land on the database in one instant.
RETRY_BACKOFF = Backoff(timedelta(milliseconds=50), timedelta(seconds=2))


class Written(Enum):
    """What became of an ending's write (the pool names the attempt's outcome from it)."""

    RECORDED = auto()
    # The store refused it: the lease no longer held the job (recovered or superseded).
    LEASE_LOST = auto()
    # Not written: its lease ran out while the store failed, or the store refused the
    # statement for a reason retrying cannot change.
    UNRECORDED = auto()


@dataclass(frozen=True, slots=True)
class WriteResult:
    written: Written
    # Statements sent for this ending, the successful one included.
    tries: int
    # What made the last try fail, when it was not recorded.
    error: BaseException | None = None


# When the lease of an ending may run out (time.monotonic()); read at every failure,
# since renewals move it on while a write is retried.
Deadline = Callable[[], float]


@dataclass(slots=True, eq=False)
class PendingWrite:
    """An ending waiting for its write, and the future its attempt learns the result from."""

    lease: Lease
    decision: Decision
    deadline: Deadline
    done: asyncio.Future[WriteResult]
    tries: int = 0


class OutcomeWriter:
    """Writes endings through `JobStore.record_many`, batching those that wait."""

    def __init__(
        self,
        store: JobStore,
        timeout: timedelta,
        *,
        max_batch: int = MAX_ENDINGS_PER_WRITE,
        backoff: Backoff = RETRY_BACKOFF,
        rand: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        self._store = store
        self._timeout = timeout.total_seconds()
        self._max_batch = max_batch
        self._backoff = backoff
        self._rand = rand
        self._clock = clock
        self._waiting: list[PendingWrite] = []
        self._writer: asyncio.Task[None] | None = None
        # Failed tries in a row; while there are any, the writer's own task retries
        # with backoff and claims carry nothing.
        self._failures = 0
        # A claim will carry what waits: no write of the writer's own is started.
        self._carried_next = False
        # The context of the first ending that waited for a claim: a write started for
        # it later (`flush`) is traced as part of that attempt, as an immediate one is.
        self._context: contextvars.Context | None = None
        # That context, once a claim took those endings (`taken_context`).
        self._taken_context: contextvars.Context | None = None

    @property
    def timeout(self) -> float:
        """Seconds one try of a write may take."""
        return self._timeout

    def write(
        self, lease: Lease, decision: Decision, deadline: Deadline
    ) -> asyncio.Future[WriteResult]:
        """Queue the ending; the future says how it went. It never raises."""
        done: asyncio.Future[WriteResult] = asyncio.get_running_loop().create_future()
        self._waiting.append(PendingWrite(lease, decision, deadline, done))
        if self._writer is None:
            if self._carried_next:
                if self._context is None:
                    self._context = contextvars.copy_context()
            else:
                self._start(None)
        return done

    def take(self) -> list[PendingWrite]:
        """The endings a claim about to be sent should carry (maybe none); report how it
        went with `carried` or `carry_failed`. Until `flush`, later endings wait for the
        next claim."""
        self._carried_next = True
        if self._writer is not None or self._failures:
            return []  # the writer's own task has them, or is retrying with backoff
        batch = self._next_batch()
        if batch:
            self._taken_context, self._context = self._context, None
        return batch

    def taken_context(self) -> contextvars.Context | None:
        """The context of the first ending the last `take` returned: the claim carrying
        them is traced as part of that attempt, as a write of the writer's own is."""
        context, self._taken_context = self._taken_context, None
        return context

    async def claim(
        self,
        wanted: int,
        lease: timedelta,
        queue: str,
        types: Collection[str],
        *,
        traced: bool,
    ) -> Claimed:
        """Claim up to `wanted` jobs of `queue` and `types`, carrying the endings waiting
        to be written (`take`): one statement where a busy pool would send two
        (`JobStore.record_and_claim`). `traced`: the statement is a span of the attempt
        whose ending waited first."""
        carried = self.take()
        if not carried:
            return await self._store.claim(wanted, lease, queue, types=types)
        context = self.taken_context()
        try:
            async with asyncio.timeout(self._timeout):
                writing = self._store.record_and_claim(
                    as_decided(carried), wanted, lease, queue, types=types
                )
                if context is None or not traced:
                    held, jobs = await writing
                else:
                    # Awaited as a task, it is cancelled with this one.
                    held, jobs = await asyncio.create_task(writing, context=context)
        except BaseException as error:
            # Cancelled too (a forced shutdown): taken back either way.
            self.carry_failed(carried, error)
            raise
        self.carried(carried, held)
        return jobs

    def carried(self, batch: list[PendingWrite], held: set[Lease]) -> None:
        """The claim that carried `batch` went through; `held` as `record_many` says."""
        _settle_all(batch, held)

    def carry_failed(self, batch: list[PendingWrite], error: BaseException) -> None:
        """The claim that carried `batch` failed with `error`: the writer takes them back."""
        retry = self._failed(batch, error)
        if retry:
            self._waiting[:0] = retry
            self._failures += 1
            if self._writer is None:
                self._start(None)

    def flush(self) -> None:
        """No claim is coming soon: whatever waits for one is written now."""
        self._carried_next = False
        context, self._context = self._context, None
        if self._waiting and self._writer is None:
            self._start(context)

    async def idle(self) -> None:
        """Return once every queued ending has been written or given up."""
        self.flush()
        while self._writer is not None:
            await asyncio.shield(self._writer)

    def _start(self, context: contextvars.Context | None) -> None:
        # Not cancelled by anyone: shutdown waits for the attempts' futures, every try is
        # bounded by the timeout and every ending by its deadline, so the writer always
        # comes to an end. It runs in the context of the attempt that started it, so a
        # traced batch write is a span of that attempt.
        self._writer = asyncio.create_task(
            self._write_all(), name="jobqueue outcomes", context=context
        )

    async def _write_all(self) -> None:
        try:
            while self._waiting:
                if self._failures:
                    delay = self._backoff.delay(self._failures, self._rand)
                    await asyncio.sleep(delay.total_seconds())
                retry = await self._write(self._next_batch())
                if not retry:
                    self._failures = 0
                    continue
                # Back in front of whatever arrived meanwhile, which joins the next try.
                self._waiting[:0] = retry
                self._failures += 1
        finally:
            self._writer = None
            # Nothing left to retry: the next ending is written at once.
            self._failures = 0

    async def _write(self, batch: list[PendingWrite]) -> list[PendingWrite]:
        """Write `batch`; return the endings to try again."""
        try:
            async with asyncio.timeout(self._timeout):
                held = await self._store.record_many(as_decided(batch))
        except Exception as error:
            return self._failed(batch, error)
        _settle_all(batch, held)
        return []

    def _next_batch(self) -> list[PendingWrite]:
        """The oldest waiting endings, at most a batch, each counted as tried once more."""
        batch = self._waiting[: self._max_batch]
        del self._waiting[: self._max_batch]
        for pending in batch:
            pending.tries += 1
        return batch

    def _failed(self, batch: list[PendingWrite], error: BaseException) -> list[PendingWrite]:
        """After `batch`'s write failed with `error`: the endings to try again."""
        # A claim carrying the batch that was cancelled on its way (a forced shutdown) may
        # or may not have written it, like one that timed out: tried again, the fence
        # refuses a second write.
        if isinstance(error, StoreUnavailable | TimeoutError | asyncio.CancelledError):
            return self._after_failure(batch, error)
        # Not transient (a statement the store refuses): trying again cannot help.
        _log.error(
            "writing outcomes failed; their jobs are left to lease recovery",
            exc_info=error,
            extra={"count": len(batch)},
        )
        for pending in batch:
            _settle(pending, Written.UNRECORDED, error)
        return []

    def _after_failure(self, batch: list[PendingWrite], error: BaseException) -> list[PendingWrite]:
        now = self._clock()
        retry = []
        for pending in batch:
            if pending.done.done():
                continue  # its attempt stopped waiting (a forced shutdown)
            if now >= pending.deadline():
                _settle(pending, Written.UNRECORDED, error)
            else:
                retry.append(pending)
        if retry:
            _log.warning(
                "writing outcomes failed; trying again",
                extra={"count": len(retry), "error": f"{type(error).__name__}: {error}"},
            )
        return retry


def as_decided(batch: list[PendingWrite]) -> list[tuple[Lease, Decision]]:
    """`batch` as `JobStore.record_many` (or a claim carrying it) takes it."""
    return [(pending.lease, pending.decision) for pending in batch]


def _settle_all(batch: list[PendingWrite], held: set[Lease]) -> None:
    for pending in batch:
        _settle(pending, Written.RECORDED if pending.lease in held else Written.LEASE_LOST)


def _settle(pending: PendingWrite, written: Written, error: BaseException | None = None) -> None:
    if not pending.done.done():
        pending.done.set_result(WriteResult(written, pending.tries, error))
