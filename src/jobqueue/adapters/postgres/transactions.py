"""A handler's own transaction, which also writes its job's ending
(`JobContext.transaction`): `PostgresTransactions`.

The handler writes its rows on the connection it is given; when it has returned, the
worker writes the job's completion on the same connection, fenced by the attempt's
lease like every ending (`queries/jobs.ENDINGS`), and commits both at once. A fence that
holds no row (the lease was lost: recovered, or the job cancelled) rolls the whole
transaction back, so the handler's writes happen exactly when its job completes: once.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from jobqueue.adapters.postgres.failures import store_failures
from jobqueue.adapters.postgres.queries import jobs as q
from jobqueue.adapters.postgres.store import ending_values
from jobqueue.domain.job import Lease
from jobqueue.domain.outcome import Decision


class PostgresTransaction:
    """One attempt's open transaction on a connection of its own."""

    def __init__(self, connection: AsyncConnection) -> None:
        self._connection = connection

    @property
    def connection(self) -> AsyncConnection:
        return self._connection

    async def finish(self, lease: Lease, decision: Decision) -> bool:
        """Write the ending in the transaction and commit it all; False (rolled back) when
        the lease no longer held the job."""
        try:
            with store_failures():
                result = await self._connection.execute(
                    q.RECORD_ENDINGS.clause, ending_values([(lease, decision)])
                )
                held = {Lease(job_id, token) for job_id, token in result.all()}
                if lease not in held:
                    await self._connection.rollback()
                    return False
                await self._connection.commit()
                return True
        finally:
            await self._connection.close()

    async def abandon(self) -> None:
        """Roll it back: the attempt did not complete."""
        try:
            await self._connection.rollback()
        finally:
            await self._connection.close()


class PostgresTransactions:
    """Opens attempts' transactions on `engine`."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def begin(self) -> PostgresTransaction:
        with store_failures():
            connection = await self._engine.connect()
            try:
                await connection.begin()
            except BaseException:
                await connection.close()
                raise
        return PostgresTransaction(connection)
