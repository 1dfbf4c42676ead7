"""Read-only numbers about the queue, for metrics; never on a job's path."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.failures import store_failures
from jobqueue.adapters.postgres.schema import jobs, status_literal
from jobqueue.domain.status import COUNTED, Status


class PostgresQueueStats:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def count_by_status(self) -> Mapping[Status, int]:
        """Jobs per counted status (`status.COUNTED`). Each counted status has a partial
        index holding only its rows (`TRAITS[status].index`), so each count reads that
        small index, never the table; finished jobs are not counted."""
        statement = select(
            *(
                select(func.count())
                .select_from(jobs)
                .where(jobs.c.status == status_literal(status))
                .scalar_subquery()
                .label(status.value)
                for status in COUNTED
            )
        )
        with store_failures():
            async with self._engine.connect() as connection:
                row = (await connection.execute(statement)).one()
        return dict(zip(COUNTED, row, strict=True))
