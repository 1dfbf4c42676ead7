"""Read-only numbers about the queue, for metrics; never on a job's path."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.failures import store_failures
from jobqueue.adapters.postgres.schema import jobs
from jobqueue.domain.job import Status


class PostgresQueueStats:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def count_by_status(self) -> Mapping[Status, int]:
        """Jobs per status. One scan of the table: retention keeps finished rows few,
        and the caller refreshes every few seconds, not per scrape."""
        statement = select(jobs.c.status, func.count()).group_by(jobs.c.status)
        with store_failures():
            async with self._engine.connect() as connection:
                rows = (await connection.execute(statement)).all()
        return {Status(status): count for status, count in rows}
