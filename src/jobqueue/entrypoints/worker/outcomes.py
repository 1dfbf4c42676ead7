"""Outcome writes: every ending of every attempt through one batched, fenced statement,
retried until it is recorded or the lease it belongs to runs out.

The batch forms by itself, like a group commit: an ending arriving while no write is in
flight goes out on the next turn of the event loop, together with whatever ended in the
same turn, so an idle pool adds no delay; endings arriving while a write is in flight go
out together in the next one.

A write that fails for a transient reason (the database restarting, a connection
killed, a statement timed out) is tried again with jittered backoff, the whole batch at
once, for as long as each ending's lease may still be held: an attempt whose handler
finished during a database blip is recorded when the database returns, and is not run
again by recovery. Only when its lease has run out is an ending given up, and its job
left to lease recovery, which counts the attempt.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from jobqueue.domain.backoff import Backoff
from jobqueue.domain.errors import StoreUnavailable
from jobqueue.domain.job import Lease
from jobqueue.domain.outcome import Decision
from jobqueue.domain.ports import JobStore

_log = logging.getLogger("jobqueue.worker")

# Bounds one statement's size (six arrays of this many elements), not the wait.
MAX_BATCH = 500
# Between tries of a failed write: quick enough to catch a blip, spread so that many
# processes coming back together do not land on the database in one instant.
RETRY_BACKOFF = Backoff(timedelta(milliseconds=50), timedelta(seconds=2))


class Written(StrEnum):
    RECORDED = "recorded"
    # The store refused it: the lease no longer held the job (recovered or superseded).
    LEASE_LOST = "lease_lost"
    # Not written: its lease ran out while the store failed, or the store refused the
    # statement for a reason retrying cannot change.
    UNRECORDED = "unrecorded"


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
class _Pending:
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
        max_batch: int = MAX_BATCH,
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
        self._waiting: list[_Pending] = []
        self._writer: asyncio.Task[None] | None = None

    def write(
        self, lease: Lease, decision: Decision, deadline: Deadline
    ) -> asyncio.Future[WriteResult]:
        """Queue the ending; the future says how it went. It never raises."""
        done: asyncio.Future[WriteResult] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Pending(lease, decision, deadline, done))
        if self._writer is None:
            # Not cancelled by anyone: shutdown waits for the attempts' futures, every try
            # is bounded by the timeout and every ending by its deadline, so the writer
            # always comes to an end. It runs in the context of the attempt that started
            # it, so a traced batch write is a span of that attempt.
            self._writer = asyncio.create_task(self._write_all(), name="jobqueue outcomes")
        return done

    async def idle(self) -> None:
        """Return once every queued ending has been written or given up."""
        while self._writer is not None:
            await asyncio.shield(self._writer)

    async def _write_all(self) -> None:
        failures = 0
        try:
            while self._waiting:
                batch = self._waiting[: self._max_batch]
                del self._waiting[: self._max_batch]
                retry = await self._write(batch)
                if not retry:
                    failures = 0
                    continue
                # Back in front of whatever arrived meanwhile, which joins the next try.
                self._waiting[:0] = retry
                failures += 1
                await asyncio.sleep(self._backoff.delay(failures, self._rand).total_seconds())
        finally:
            self._writer = None

    async def _write(self, batch: list[_Pending]) -> list[_Pending]:
        """Write `batch`; return the endings to try again."""
        for pending in batch:
            pending.tries += 1
        try:
            async with asyncio.timeout(self._timeout):
                held = await self._store.record_many([(p.lease, p.decision) for p in batch])
        except (StoreUnavailable, TimeoutError) as error:
            return self._after_failure(batch, error)
        except Exception as error:
            # Not transient (a statement the store refuses): trying again cannot help.
            _log.error(
                "writing outcomes failed; their jobs are left to lease recovery",
                exc_info=error,
                extra={"count": len(batch)},
            )
            for pending in batch:
                _settle(pending, Written.UNRECORDED, error)
            return []
        for pending in batch:
            outcome = Written.RECORDED if pending.lease in held else Written.LEASE_LOST
            _settle(pending, outcome)
        return []

    def _after_failure(self, batch: list[_Pending], error: BaseException) -> list[_Pending]:
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


def _settle(pending: _Pending, written: Written, error: BaseException | None = None) -> None:
    if not pending.done.done():
        pending.done.set_result(WriteResult(written, pending.tries, error))
