"""Read-only numbers about the queue, for metrics; never on a job's path."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.driver import fetch_pooled
from jobqueue.adapters.postgres.failures import store_failures
from jobqueue.adapters.postgres.queries.listing import COUNT_BY_STATUS
from jobqueue.domain.status import COUNTED, Status


class PostgresQueueStats:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def count_by_status(self) -> Mapping[Status, int]:
        """Jobs per counted status (`status.COUNTED`). Each counted status has a partial
        index holding only its rows (`TRAITS[status].index`), so each count reads that
        small index, never the table; finished jobs are not counted."""
        with store_failures():
            (row,) = await fetch_pooled(self._engine, COUNT_BY_STATUS, {})
        return {status: row[status.value] for status in COUNTED}
