"""Rows of `jobs` into domain `Job`s: the one place the store's columns meet the domain."""

from __future__ import annotations

from sqlalchemy import RowMapping

from jobqueue.domain.job import Job
from jobqueue.domain.status import Status


def job_from_row(row: RowMapping) -> Job:
    return Job(
        id=row["id"],
        type=row["type"],
        payload=row["payload"],
        status=Status(row["status"]),
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        run_at=row["run_at"],
        locked_until=row["locked_until"],
        lease_token=row["lease_token"],
        last_error=row["last_error"],
        idempotency_key=row["idempotency_key"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        traceparent=row["traceparent"],
    )
