"""In-process enqueue: a job inserted inside the caller's own connection and transaction.

The job exists if and only if the caller's transaction commits, so it can be enqueued
atomically with the application's own writes. `PostgresJobStore.submit` uses the same
statement in autocommit.
"""

from __future__ import annotations

from dataclasses import fields

from sqlalchemy import and_, literal, select
from sqlalchemy.dialects.postgresql import JSONB, insert
from sqlalchemy.ext.asyncio import AsyncConnection

from jobqueue.adapters.postgres.failures import refused_values, store_failures
from jobqueue.adapters.postgres.rows import job_from_row
from jobqueue.adapters.postgres.schema import jobs
from jobqueue.domain.errors import IdempotencyConflict, StoreUnavailable
from jobqueue.domain.job import NewJob
from jobqueue.domain.ports import Submitted

_NEW_JOB_FIELDS = tuple(field.name for field in fields(NewJob))

# The columns come from the parameters each call passes, typed by the table.
_SUBMIT = (
    insert(jobs)
    .on_conflict_do_nothing(
        index_elements=[jobs.c.idempotency_key],
        index_where=jobs.c.idempotency_key.is_not(None),
    )
    .returning(*jobs.c)
)


async def enqueue(connection: AsyncConnection, new: NewJob) -> Submitted:
    """Submit `new` inside the caller's connection and transaction.

    Enqueue a job atomically with your own writes: the job exists if and only if the
    caller's transaction commits. Duplicate Idempotency-Keys are safe under concurrency:
    the unique index decides the winner, the others read the winner's job back.
    Raises `InvalidJob` for a value PostgreSQL refuses, `IdempotencyConflict` for a key
    used by a different request, `StoreUnavailable` when the database fails.
    """
    with store_failures(), refused_values():
        inserted = await connection.execute(_SUBMIT, _columns(new))
        row = inserted.mappings().one_or_none()
        if row is not None:
            return Submitted(job_from_row(row), replayed=False)
        if new.idempotency_key is None:  # pragma: no cover - only the key's index can conflict
            raise StoreUnavailable("the job store inserted no row and reported no conflict")
        return await _replay(connection, new, new.idempotency_key)


def _columns(new: NewJob) -> dict[str, object]:
    # Every NewJob field is the column of the same name; the rest have server defaults.
    return {name: getattr(new, name) for name in _NEW_JOB_FIELDS}


# The name the first releases documented; kept so that code written against them runs.
submit_in = enqueue


async def _replay(connection: AsyncConnection, new: NewJob, key: str) -> Submitted:
    # Only reached on a key conflict. Payloads are compared as jsonb, so key order and
    # whitespace do not make two equal requests differ.
    same_request = and_(
        jobs.c.type == new.type,
        jobs.c.payload == literal(new.payload, JSONB),
        jobs.c.max_attempts == new.max_attempts,
    ).label("same_request")
    found = await connection.execute(
        select(*jobs.c, same_request).where(jobs.c.idempotency_key == key)
    )
    row = found.mappings().one_or_none()
    if row is None:
        # The conflicting job was deleted (retention) between the two statements; the
        # key is free again, so submitting again succeeds.
        raise StoreUnavailable(
            f"the job holding Idempotency-Key {key!r} was deleted during this submission; "
            "submit again"
        )
    if not row["same_request"]:
        raise IdempotencyConflict(key)
    return Submitted(job_from_row(row), replayed=True)
