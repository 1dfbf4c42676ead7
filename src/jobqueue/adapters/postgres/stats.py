"""Read-only numbers about the queue, for metrics; never on a job's path."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.failures import store_failures
from jobqueue.adapters.postgres.schema import jobs, status_literal
from jobqueue.domain.job import TERMINAL, Status

# Each of these has a partial index holding only its rows (ix_jobs_due, ix_jobs_lease_expiry,
# ix_jobs_dead_letter), so each count reads that small index, never the table. Finished jobs
# are left out: counting them reads every one of them, every refresh, however many
# retention keeps; the job counters say how many finish.
COUNTED: tuple[Status, ...] = tuple(status for status in Status if status not in TERMINAL)


class PostgresQueueStats:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def count_by_status(self) -> Mapping[Status, int]:
        """Jobs per status that is not terminal (pending, processing, dead_letter)."""
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
