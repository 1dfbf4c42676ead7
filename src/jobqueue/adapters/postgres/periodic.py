"""The last slot each periodic job ran, on PostgreSQL (`queries/periodic.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from uuid import uuid4

from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.driver import fetch_pooled
from jobqueue.adapters.postgres.enqueue import insert_values
from jobqueue.adapters.postgres.failures import refused_values, store_failures
from jobqueue.adapters.postgres.queries.periodic import (
    INSERT_MISSED_SLOT_JOB,
    INSERT_SLOT_JOB,
    LAST_SLOTS,
)
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.periodic import LastSlot


class PostgresPeriodicSlots:
    """`PeriodicSlots` on PostgreSQL."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def insert_slot(
        self, name: str, slot: datetime, new: NewJob, *, missed: bool = False
    ) -> Job | None:
        job_id = uuid4()
        values = {**insert_values(new), "periodic": name, "slot": slot, "id": job_id}
        statement = INSERT_MISSED_SLOT_JOB if missed else INSERT_SLOT_JOB
        with store_failures(), refused_values():
            rows = await fetch_pooled(self._engine, statement, values)
        return new.stored(job_id, rows[0]["created_at"]) if rows else None

    async def last_slots(self) -> Mapping[str, LastSlot]:
        with store_failures():
            rows = await fetch_pooled(self._engine, LAST_SLOTS, {})
        return {row["name"]: LastSlot(row["last_slot"], row["last_job_id"]) for row in rows}
