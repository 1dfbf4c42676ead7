"""Attempts that write in their own transaction (`ctx.transaction()`): the handler's
writes and its job's completion commit together, or not at all.

`async with ctx.transaction() as connection:` opens a transaction on a connection of
its own. Leaving the block by an exception rolls it back at once; leaving it normally
keeps it open until the attempt's ending: a completion is written and committed on it
(`AttemptTransaction.finish`, fenced by the lease: a lost lease rolls everything back),
any other ending (a failure, a timeout, a release at shutdown, a lost lease) rolls it
back and is written the usual way, by the `OutcomeWriter`. So a handler's writes to the
jobs' database happen once, exactly when its job completes, even if an acknowledgement
is lost on the way.

A completion so written is one try, not retried like the writer's: a commit that failed
may have rolled back the handler's writes with it, so the job is left to lease recovery,
which runs it again. A held connection counts against the engine's pool until the end.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import timedelta
from typing import Any

from jobqueue.adapters.postgres.failures import reason
from jobqueue.domain.job import Lease
from jobqueue.domain.outcome import Decision
from jobqueue.domain.ports import AttemptTransaction, AttemptTransactions
from jobqueue.domain.transitions import Operation
from jobqueue.entrypoints.worker.outcomes import Deadline, OutcomeWriter, WriteResult, Written

_log = logging.getLogger("jobqueue.worker")


class TransactionalEndings:
    """Writes each ending through the attempt's own transaction when it has one, else
    through `writer`; opens those transactions (`opener`) on `transactions`."""

    def __init__(
        self,
        writer: OutcomeWriter,
        transactions: AttemptTransactions | None,
        timeout: timedelta,
    ) -> None:
        self._writer = writer
        self._transactions = transactions
        self._timeout = timeout.total_seconds()
        # The transactions left open by their blocks, until the attempt's ending.
        self._open: dict[Lease, AttemptTransaction] = {}
        # Rollbacks and commits under way: kept, so that no task is collected mid-way.
        self._tasks: set[asyncio.Task[Any]] = set()

    def opener(self, lease: Lease) -> Callable[[], AbstractAsyncContextManager[Any]]:
        """What `ctx.transaction()` calls for the attempt holding `lease`."""
        return lambda: self._opened(lease)

    def write(
        self, lease: Lease, decision: Decision, deadline: Deadline
    ) -> asyncio.Future[WriteResult]:
        """As `OutcomeWriter.write`; a completion of an attempt with a transaction open is
        written and committed in it."""
        held = self._open.pop(lease, None)
        if held is None:
            return self._writer.write(lease, decision, deadline)
        if decision.operation is not Operation.COMPLETE:
            self._run(_rolled_back(held))
            return self._writer.write(lease, decision, deadline)
        return self._run(self._finish(held, lease, decision))

    def abandon(self, lease: Lease) -> None:
        """The attempt ended with nothing to write (its lease is gone): roll back."""
        held = self._open.pop(lease, None)
        if held is not None:
            self._run(_rolled_back(held))

    async def idle(self) -> None:
        """Return once every commit and rollback under way has ended."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    @asynccontextmanager
    async def _opened(self, lease: Lease) -> AsyncIterator[Any]:
        if self._transactions is None:
            raise RuntimeError("ctx.transaction() needs a worker on a database; this one has none")
        if lease in self._open:
            raise RuntimeError("ctx.transaction() is entered once per attempt")
        held = await self._transactions.begin()
        self._open[lease] = held
        try:
            yield held.connection
        except BaseException:
            # Raised out of the block (a cancellation too): nothing of it is kept.
            if self._open.pop(lease, None) is held:
                await asyncio.shield(self._run(_rolled_back(held)))
            raise

    async def _finish(
        self, held: AttemptTransaction, lease: Lease, decision: Decision
    ) -> WriteResult:
        try:
            async with asyncio.timeout(self._timeout):
                recorded = await held.finish(lease, decision)
        except Exception as error:
            return WriteResult(Written.UNRECORDED, 1, error)
        return WriteResult(Written.RECORDED if recorded else Written.LEASE_LOST, 1)

    def _run(self, work: Any) -> asyncio.Task[Any]:
        task = asyncio.create_task(work, name="jobqueue attempt transaction")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


async def _rolled_back(held: AttemptTransaction) -> None:
    try:
        await held.abandon()
    except Exception as error:
        # Nothing was committed either way: a connection that cannot roll back is
        # closed, and the server rolls back what it held.
        _log.warning("rolling back a job's transaction failed", extra={"error": reason(error)})
