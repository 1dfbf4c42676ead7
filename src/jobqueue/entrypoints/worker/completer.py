"""Completions written in batches: one fenced statement for the attempts that finished
while the previous batch was being written.

Completing is the common outcome, and one statement (and commit) per job is what caps a
pool's throughput. The batch forms by itself, like a group commit: a completion arriving
while no write is in flight goes out on the next turn of the event loop, together with
whatever finished in the same turn, so an idle pool adds no delay; completions arriving
while a write is in flight wait for it and go out together in the next one.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from jobqueue.domain.errors import StoreUnavailable
from jobqueue.domain.job import Lease
from jobqueue.domain.ports import JobStore

# Bounds one statement's size (two arrays of this many elements), not the wait.
MAX_BATCH = 500


class Completer:
    """Writes completions through `JobStore.complete_many`, batching those that wait."""

    def __init__(self, store: JobStore, timeout: timedelta, max_batch: int = MAX_BATCH) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        self._store = store
        self._timeout = timeout.total_seconds()
        self._max_batch = max_batch
        self._waiting: list[tuple[Lease, asyncio.Future[bool]]] = []
        self._writer: asyncio.Task[None] | None = None

    def complete(self, lease: Lease) -> asyncio.Future[bool]:
        """Queue the completion; the future says whether the job was completed (False:
        the lease was lost) or raises `StoreUnavailable` when the write failed."""
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting.append((lease, done))
        if self._writer is None:
            # Not cancelled by anyone: shutdown waits for the attempts' futures, and each
            # write is bounded by the timeout, so the writer always comes to an end. It
            # runs in the context of the attempt that started it, so a traced batch write
            # is a span of that attempt (alone in its batch when the pool is not busy).
            self._writer = asyncio.create_task(self._write_all(), name="jobqueue completer")
        return done

    async def idle(self) -> None:
        """Return once every queued completion has been written (or has failed)."""
        while self._writer is not None:
            await asyncio.shield(self._writer)

    async def _write_all(self) -> None:
        try:
            while self._waiting:
                batch = self._waiting[: self._max_batch]
                del self._waiting[: self._max_batch]
                await self._write(batch)
        finally:
            self._writer = None

    async def _write(self, batch: list[tuple[Lease, asyncio.Future[bool]]]) -> None:
        try:
            async with asyncio.timeout(self._timeout):
                completed = await self._store.complete_many([lease for lease, _ in batch])
        except Exception as error:
            # Reported by each attempt (outcome "unrecorded"), with this as the cause.
            for _, done in batch:
                # An attempt that stopped waiting (its own timeout) cancelled its future.
                if not done.done():
                    # One exception per attempt: each is raised, and logged, in its own task.
                    failure = StoreUnavailable(f"the batched completion failed: {error!r}")
                    failure.__cause__ = error
                    done.set_exception(failure)
            return
        for lease, done in batch:
            if not done.done():
                done.set_result(lease in completed)
