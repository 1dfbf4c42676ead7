"""The job store on PostgreSQL: each operation of the state machine is one guarded statement.

Every write is a compare-and-swap: `UPDATE … WHERE status = <from>` (and, for outcome
writes, `AND lease_token = <claimed token>`) applies atomically or touches no row. A row
is read back only on an error path, to say which error it is.

Statuses are rendered into the SQL as literals, not bound: the partial indexes
(`WHERE status = 'pending'`, `WHERE status = 'processing'`) can serve a statement only
when its predicate visibly implies theirs, and a generic plan of a prepared statement
cannot see through `status = $1`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any
from uuid import UUID

from sqlalchemy import (
    ARRAY,
    BigInteger,
    ColumnElement,
    Interval,
    RowMapping,
    Text,
    and_,
    any_,
    bindparam,
    case,
    cast,
    delete,
    func,
    literal,
    or_,
    select,
    text,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB, insert
from sqlalchemy.dialects.postgresql import UUID as PG_UUID
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql import Executable
from sqlalchemy.sql.dml import Update

from jobqueue.adapters.postgres.failures import refused_values, store_failures
from jobqueue.adapters.postgres.rows import job_from_row
from jobqueue.adapters.postgres.schema import jobs
from jobqueue.adapters.postgres.schema import status_literal as _status
from jobqueue.domain.errors import (
    IdempotencyConflict,
    InvalidTransition,
    JobNotFound,
    LeaseLost,
    StoreUnavailable,
)
from jobqueue.domain.job import TERMINAL, Job, Lease, NewJob, Operation, Status
from jobqueue.domain.listing import JobPage, JobQuery
from jobqueue.domain.ports import Submitted

LEASE_EXPIRED_ERROR = (
    "lease expired before the attempt finished: the process running it probably died"
)

# A job can leave dead_letter between a refused manual retry and the read that explains
# the refusal, and come back to it; a few rounds settle any realistic race.
_MANUAL_RETRY_ROUNDS = 3


def check_prune_request(older_than: Mapping[Status, timedelta], limit: int) -> None:
    """Raise `ValueError` unless `prune_finished` may act on these arguments.

    Only terminal jobs are ever deleted: a dead letter awaits a person, and pending or
    processing jobs are live work.
    """
    if limit < 1:
        raise ValueError(f"prune limit must be at least 1, got {limit}")
    for status, age in older_than.items():
        if status not in TERMINAL:
            allowed = ", ".join(sorted(TERMINAL))
            raise ValueError(f"only finished jobs ({allowed}) can be pruned, not {status}")
        if age < timedelta(0):
            raise ValueError(f"the age of {status} jobs to prune must not be negative, got {age}")


def storable_error(error: str) -> str:
    """`error` in a form PostgreSQL's `text` can hold.

    Error texts come from whatever a handler raised: a NUL character or a lone surrogate
    (an undecodable file name, say) would make PostgreSQL refuse the outcome write, and
    the attempt's result would be lost. They are written as visible escapes instead.
    """
    return error.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")


def _interval(value: timedelta) -> ColumnElement[timedelta]:
    return literal(value, Interval())


# The hot path's statements are built once, with named parameters: building a Core
# statement per call, and computing its cache key, cost more client CPU than the round
# trip it makes.

# MATERIALIZED fences the locking subquery: inlined, the planner may evaluate it more than
# once and claim more rows than asked. SKIP LOCKED lets concurrent claimers pass each
# other's rows instead of queueing behind them. FOR UPDATE rechecks the filter on the
# newest row version, so every row locked here is still pending and stays so until this
# statement commits: the UPDATE needs no guard.
_due = (
    select(jobs.c.id)
    .where(jobs.c.status == _status(Status.PENDING), jobs.c.run_at <= func.now())
    .order_by(jobs.c.run_at)
    .limit(bindparam("limit"))
    .with_for_update(skip_locked=True)
    .cte("due")
    .prefix_with("MATERIALIZED")
)
_CLAIM = (
    update(jobs)
    .where(jobs.c.id == _due.c.id)
    .values(
        status=_status(Status.PROCESSING),
        attempts=jobs.c.attempts + 1,
        lease_token=jobs.c.lease_token + 1,
        locked_until=func.now() + bindparam("lease", type_=Interval()),
        updated_at=func.now(),
    )
    .returning(*jobs.c)
)


def _outcome_write(**changes: Any) -> Update:
    # Fenced by status and token: a stale worker (its lease recovered, the job claimed
    # again) matches no row. Leaving processing always ends the lease.
    return (
        update(jobs)
        .where(
            jobs.c.id == bindparam("job_id"),
            jobs.c.status == _status(Status.PROCESSING),
            jobs.c.lease_token == bindparam("token"),
        )
        .values(locked_until=None, updated_at=func.now(), **changes)
        .returning(*jobs.c)
    )


# The due time comes from the database clock, the one the claim compares with.
_delay = bindparam("delay", type_=Interval())
_error = bindparam("error", type_=Text())
_COMPLETE = _outcome_write(status=_status(Status.COMPLETED))
_RETRY = _outcome_write(
    status=_status(Status.PENDING), run_at=func.now() + _delay, last_error=_error
)
_FAIL = _outcome_write(status=_status(Status.FAILED), last_error=_error)
_DEAD_LETTER = _outcome_write(status=_status(Status.DEAD_LETTER), last_error=_error)
# The attempt counted at claim time is given back: shutdown is not the job's fault.
# GREATEST only guards rows written by hand; a claim always counted one.
_RELEASE = _outcome_write(
    status=_status(Status.PENDING),
    attempts=func.greatest(jobs.c.attempts - 1, 0),
    run_at=func.now(),
)

# Many completions in one statement, each row still fenced by its own token: a lease
# that was lost matches no row and is simply not returned. The arrays are cast because
# unnest() is polymorphic: PostgreSQL cannot infer an untyped parameter's type there.
_held = (
    func.unnest(
        cast(bindparam("ids"), ARRAY(PG_UUID(as_uuid=True))),
        cast(bindparam("tokens"), ARRAY(BigInteger())),
    )
    .table_valued("id", "token")
    .render_derived(name="held")
)
_COMPLETE_MANY = (
    update(jobs)
    .where(
        jobs.c.id == _held.c.id,
        jobs.c.lease_token == _held.c.token,
        jobs.c.status == _status(Status.PROCESSING),
    )
    .values(status=_status(Status.COMPLETED), locked_until=None, updated_at=func.now())
    .returning(jobs.c.id, jobs.c.lease_token)
)


# The columns come from the parameters each call passes, typed by the table.
_SUBMIT = (
    insert(jobs)
    .on_conflict_do_nothing(
        index_elements=[jobs.c.idempotency_key],
        index_where=jobs.c.idempotency_key.is_not(None),
    )
    .returning(*jobs.c)
)


async def submit_in(connection: AsyncConnection, new: NewJob) -> Submitted:
    """Submit `new` inside the caller's connection and transaction.

    Enqueue a job atomically with your own writes: the job exists if and only if the
    caller's transaction commits. Duplicate Idempotency-Keys are safe under concurrency:
    the unique index decides the winner, the others read the winner's job back.
    """
    with store_failures(), refused_values():
        inserted = await connection.execute(
            _SUBMIT,
            {
                "type": new.type,
                "payload": new.payload,
                "max_attempts": new.max_attempts,
                "idempotency_key": new.idempotency_key,
                "traceparent": new.traceparent,
            },
        )
        row = inserted.mappings().one_or_none()
        if row is not None:
            return Submitted(job_from_row(row), replayed=False)
        if new.idempotency_key is None:  # pragma: no cover - only the key's index can conflict
            raise StoreUnavailable("the job store inserted no row and reported no conflict")
        return await _replay(connection, new, new.idempotency_key)


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


class PostgresJobStore:
    """`JobStore` on PostgreSQL through a SQLAlchemy async engine (asyncpg)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        # Every operation is one statement, atomic on its own: an explicit transaction
        # would only add a BEGIN and a COMMIT round trip to each. Shares engine's pool.
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")

    async def submit(self, new: NewJob) -> Submitted:
        # Autocommit too: the insert commits on its own, and the read that explains a key
        # conflict needs no transaction, only to run after the insert saw the winner.
        with store_failures():
            async with self._autocommit.connect() as connection:
                return await submit_in(connection, new)

    async def get(self, job_id: UUID) -> Job:
        row = await self._one(select(jobs).where(jobs.c.id == job_id))
        if row is None:
            raise JobNotFound(job_id)
        return job_from_row(row)

    async def claim(self, limit: int, lease: timedelta) -> Sequence[Job]:
        if limit < 1:
            raise ValueError(f"claim limit must be at least 1, got {limit}")
        if lease <= timedelta(0):
            raise ValueError(f"lease must be positive, got {lease}")
        claimed = await self._all(_CLAIM, {"limit": limit, "lease": lease})
        return sorted(claimed, key=lambda job: job.run_at)

    async def complete(self, lease: Lease) -> Job:
        return await self._write_outcome(_COMPLETE, lease)

    async def complete_many(self, leases: Sequence[Lease]) -> set[Lease]:
        if not leases:
            return set()
        parameters = {
            "ids": [lease.job_id for lease in leases],
            "tokens": [lease.token for lease in leases],
        }
        with store_failures():
            async with self._autocommit.connect() as connection:
                result = await connection.execute(_COMPLETE_MANY, parameters)
                return {Lease(job_id, token) for job_id, token in result}

    async def retry(self, lease: Lease, delay: timedelta, error: str) -> Job:
        if delay < timedelta(0):
            raise ValueError(f"retry delay must not be negative, got {delay}")
        return await self._write_outcome(_RETRY, lease, delay=delay, error=storable_error(error))

    async def fail(self, lease: Lease, error: str) -> Job:
        return await self._write_outcome(_FAIL, lease, error=storable_error(error))

    async def dead_letter(self, lease: Lease, error: str) -> Job:
        return await self._write_outcome(_DEAD_LETTER, lease, error=storable_error(error))

    async def release(self, lease: Lease) -> Job:
        return await self._write_outcome(_RELEASE, lease)

    async def manual_retry(self, job_id: UUID) -> Job:
        # lease_token is left alone: it must keep growing so that claims from before the
        # reset stay fenced even though attempt numbers start over.
        statement = (
            update(jobs)
            .where(jobs.c.id == job_id, jobs.c.status == _status(Status.DEAD_LETTER))
            .values(
                status=_status(Status.PENDING),
                attempts=0,
                run_at=func.now(),
                updated_at=func.now(),
            )
            .returning(*jobs.c)
        )
        status: str | None = None
        for _ in range(_MANUAL_RETRY_ROUNDS):
            row = await self._one(statement)
            if row is not None:
                return job_from_row(row)
            status = await self._status_of(job_id)
            if status is None:
                raise JobNotFound(job_id)
            if status != Status.DEAD_LETTER:
                break
        raise InvalidTransition(job_id, Operation.MANUAL_RETRY, str(status))

    async def recover_expired(self, limit: int) -> Sequence[Job]:
        if limit < 1:
            raise ValueError(f"recovery limit must be at least 1, got {limit}")
        # SKIP LOCKED: a row locked right now is being written by its worker; recovery
        # must never make that worker wait, and can take the row next round if needed.
        expired = (
            select(jobs.c.id)
            .where(
                jobs.c.status == _status(Status.PROCESSING),
                jobs.c.locked_until < func.now(),
            )
            .order_by(jobs.c.locked_until)
            .limit(limit)
            .with_for_update(skip_locked=True)
            .cte("expired")
            .prefix_with("MATERIALIZED")
        )
        # The lost attempt counts (it was counted at claim): a job that kills its process
        # every time still runs out of attempts and is dead-lettered.
        last_attempt = jobs.c.attempts >= jobs.c.max_attempts
        return await self._all(
            update(jobs)
            .where(jobs.c.id == expired.c.id)
            .values(
                status=case(
                    (last_attempt, _status(Status.DEAD_LETTER)),
                    else_=_status(Status.PENDING),
                ),
                run_at=case((last_attempt, jobs.c.run_at), else_=func.now()),
                locked_until=None,
                last_error=LEASE_EXPIRED_ERROR,
                updated_at=func.now(),
            )
            .returning(*jobs.c)
        )

    async def prune_finished(self, older_than: Mapping[Status, timedelta], limit: int) -> int:
        check_prune_request(older_than, limit)
        if not older_than:
            return 0
        # One locking scan per status, each a contiguous range of ix_jobs_finished in age
        # order, so a status kept long never slows the pruning of another. Each takes at
        # most `limit`, which holds the oldest `limit` of all: the outer LIMIT keeps those.
        # SKIP LOCKED: processes pruning at once take different rows. A finished row is
        # never updated, so nothing but another pruner can hold its lock.
        aged = [
            select(jobs.c.id, jobs.c.updated_at)
            .where(
                jobs.c.status == _status(status),
                jobs.c.updated_at < func.now() - _interval(age),
            )
            .order_by(jobs.c.updated_at)
            .limit(limit)
            .with_for_update(skip_locked=True)
            .cte(f"aged_{status.value}")
            .prefix_with("MATERIALIZED")
            for status, age in sorted(older_than.items())
        ]
        candidates = union_all(*(select(cte.c.id, cte.c.updated_at) for cte in aged)).subquery()
        oldest = select(candidates.c.id).order_by(candidates.c.updated_at).limit(limit)
        # `= ANY(ARRAY(…))`, not `IN (…)`: the ids are collected first and looked up in the
        # primary key. Joined as a subquery, a batch of a thousand can tip the planner into
        # hashing it and scanning the whole table to find the rows to delete.
        doomed = jobs.c.id == any_(func.array(oldest.scalar_subquery()))
        with store_failures():
            async with self._engine.begin() as connection:
                result = await connection.execute(delete(jobs).where(doomed))
                return result.rowcount

    async def list_jobs(self, query: JobQuery) -> JobPage:
        order = query.order
        column = jobs.c[order.column.value]
        # The status inlined, so that the status's partial index serves the statement.
        conditions = [jobs.c.status == _status(query.status)]
        if query.type is not None:
            conditions.append(jobs.c.type == query.type)
        if query.after is not None:
            # Spelled out rather than as a row comparison: the bound on the sort column
            # alone is what the index can seek to; the id only settles ties at the boundary.
            key, job_id = query.after.key, query.after.job_id
            if order.descending:
                conditions += [column <= key, or_(column < key, jobs.c.id < job_id)]
            else:
                conditions += [column >= key, or_(column > key, jobs.c.id > job_id)]
        ordering = (column.desc(), jobs.c.id.desc()) if order.descending else (column, jobs.c.id)
        # One row more than the page: whether it exists says if there is a next page.
        listed = await self._all(
            select(jobs).where(*conditions).order_by(*ordering).limit(query.limit + 1)
        )
        page = tuple(listed[: query.limit])
        following = len(listed) > query.limit
        return JobPage(page, order.position(page[-1]) if following else None)

    async def ping(self) -> None:
        with store_failures():
            async with self._engine.connect() as connection:
                await connection.execute(text("SELECT 1"))

    async def _write_outcome(self, statement: Update, lease: Lease, **parameters: Any) -> Job:
        row = await self._one(
            statement, {"job_id": lease.job_id, "token": lease.token, **parameters}
        )
        if row is None:
            raise LeaseLost(lease.job_id, lease.token)
        return job_from_row(row)

    async def _status_of(self, job_id: UUID) -> str | None:
        row = await self._one(select(jobs.c.status).where(jobs.c.id == job_id))
        return None if row is None else str(row["status"])

    async def _one(
        self, statement: Executable, parameters: Mapping[str, Any] | None = None
    ) -> RowMapping | None:
        with store_failures():
            async with self._autocommit.connect() as connection:
                result = await connection.execute(statement, parameters)
                return result.mappings().one_or_none()

    async def _all(
        self, statement: Executable, parameters: Mapping[str, Any] | None = None
    ) -> list[Job]:
        with store_failures():
            async with self._autocommit.connect() as connection:
                result = await connection.execute(statement, parameters)
                return [job_from_row(row) for row in result.mappings()]
