"""Rows of `jobs` written and read directly, around the store rather than through it."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from sqlalchemy import func, insert, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.schema import jobs
from jobqueue.domain.status import Status

SEEDED_TOKEN = 7


async def seed_job(
    engine: AsyncEngine,
    status: Status,
    *,
    attempts: int = 1,
    max_attempts: int = 3,
    lease_token: int = SEEDED_TOKEN,
    lease: timedelta = timedelta(hours=1),
    run_in: timedelta = timedelta(0),
    job_type: str = "seeded",
) -> UUID:
    """Insert one job at `status`; a processing job holds a lease ending `lease` from now
    by the database clock (negative: already expired)."""
    locked_until = func.now() + lease if status is Status.PROCESSING else None
    async with engine.begin() as connection:
        inserted = await connection.execute(
            insert(jobs)
            .values(
                type=job_type,
                payload={"seeded": status.value},
                status=status.value,
                attempts=attempts,
                max_attempts=max_attempts,
                run_at=func.now() + run_in,
                locked_until=locked_until,
                lease_token=lease_token,
            )
            .returning(jobs.c.id)
        )
        job_id: UUID = inserted.scalar_one()
    return job_id


async def seed_many(engine: AsyncEngine, count: int, status: Status = Status.PENDING) -> None:
    """`count` due jobs at `status` in one statement (processing ones hold a 1 h lease)."""
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO jobs (type, status, attempts, max_attempts, run_at, locked_until)"
                " SELECT 'bulk', :status, CASE WHEN :status = 'pending' THEN 0 ELSE 1 END, 3,"
                "        now() - make_interval(secs => n),"
                "        CASE WHEN :status = 'processing' THEN now() + interval '1 hour' END"
                " FROM generate_series(1, :count) AS n"
            ),
            {"status": status.value, "count": count},
        )


async def read_row(engine: AsyncEngine, job_id: UUID) -> dict[str, Any] | None:
    async with engine.connect() as connection:
        found = await connection.execute(select(jobs).where(jobs.c.id == job_id))
        row = found.mappings().one_or_none()
    return None if row is None else dict(row)


async def database_now(engine: AsyncEngine) -> datetime:
    async with engine.connect() as connection:
        now: datetime = (await connection.execute(select(func.clock_timestamp()))).scalar_one()
    return now


async def expire_lease(engine: AsyncEngine, job_id: UUID) -> None:
    async with engine.begin() as connection:
        await connection.execute(
            text("UPDATE jobs SET locked_until = now() - interval '1 second' WHERE id = :id"),
            {"id": job_id},
        )


async def count_jobs(engine: AsyncEngine, status: Status | None = None) -> int:
    statement = select(func.count()).select_from(jobs)
    if status is not None:
        statement = statement.where(jobs.c.status == status.value)
    async with engine.connect() as connection:
        total: int = (await connection.execute(statement)).scalar_one()
    return total
