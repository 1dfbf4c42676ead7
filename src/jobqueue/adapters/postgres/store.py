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

from collections import defaultdict
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime, timedelta
from os import getpid
from socket import gethostname
from typing import Any
from uuid import UUID

import asyncpg
from sqlalchemy import (
    ARRAY,
    BigInteger,
    ColumnElement,
    DateTime,
    Integer,
    Interval,
    RowMapping,
    SmallInteger,
    Text,
    and_,
    any_,
    bindparam,
    case,
    cast,
    delete,
    func,
    literal,
    literal_column,
    or_,
    select,
    text,
    true,
    tuple_,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import UUID as PG_UUID
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql import Executable
from sqlalchemy.types import TypeEngine

from jobqueue.adapters.postgres.attempt_log import logged
from jobqueue.adapters.postgres.by_type import per_type, types_of
from jobqueue.adapters.postgres.cancels import cancelling
from jobqueue.adapters.postgres.claim_cursor import FROM_START, ClaimCursor, Keys
from jobqueue.adapters.postgres.database import autocommit
from jobqueue.adapters.postgres.driver import DriverStatement, fetch_pooled
from jobqueue.adapters.postgres.enqueue import enqueue_many, submit_in, submit_pooled
from jobqueue.adapters.postgres.failures import store_failures
from jobqueue.adapters.postgres.queues import PAUSED, PostgresQueues
from jobqueue.adapters.postgres.rows import job_from_row
from jobqueue.adapters.postgres.schema import jobs
from jobqueue.adapters.postgres.schema import status_literal as _status
from jobqueue.domain.attempts import LEASE_EXPIRED, holds_final_attempt
from jobqueue.domain.bulk import ACTIONABLE, CANCELLABLE, Selection
from jobqueue.domain.errors import (
    InvalidTransition,
    JobNotFound,
    StoreError,
    StoreUnavailable,
    UniqueKeyHeld,
)
from jobqueue.domain.job import DEFAULT_QUEUE, PRIORITIES, Job, Lease, NewJob, Operation
from jobqueue.domain.listing import JobPage, JobQuery, position_of
from jobqueue.domain.outcome import LEASE_EXPIRED_ERROR, Decision, Outcome
from jobqueue.domain.ports import Submitted
from jobqueue.domain.queues import QueueState, QueueSummary
from jobqueue.domain.retention import check_prune_request
from jobqueue.domain.status import TRAITS, Status

# `submit_in` was documented here before `jobqueue.enqueue` existed.
__all__ = ["PostgresJobStore", "submit_in"]

# A job can leave dead_letter between a refused retry (or leave processing between a
# refused cancel) and the read that explains the refusal, and come back to it; a few
# rounds settle any realistic race.
_REFUSAL_ROUNDS = 3
# A retried unique job found its key held (`uq_jobs_unique_key`).
_UNIQUE_VIOLATION = "23505"


def _interval(value: timedelta) -> ColumnElement[timedelta]:
    return literal(value, Interval())


def _literal(text: str) -> ColumnElement[str]:
    # A constant of ours, inlined like the statuses: no parameter for it.
    return literal_column(f"'{text}'", Text)


# The hot path's statements are built once, with named parameters: building a Core
# statement per call, and computing its cache key, cost more client CPU than the round
# trip it makes.

# MATERIALIZED fences the locking subquery: inlined, the planner may evaluate it more than
# once and claim more rows than asked. SKIP LOCKED lets concurrent claimers pass each
# other's rows instead of queueing behind them. FOR UPDATE rechecks the filter on the
# newest row version, so every row locked here is still pending and stays so until this
# statement commits: the UPDATE needs no guard.
#
# One queue's due jobs, most urgent priority first, then due order: for each priority in
# turn (an array of them, in order, with the key each range's scan starts after), a
# LATERAL scan of that priority's range of ix_jobs_due_by_queue, in which `run_at <=
# now()` bounds the range, so jobs scheduled later are never read. The outer LIMIT stops
# the nested loop once enough rows came back, and rows are locked only as they are
# pulled, so no more than asked are locked, and a priority's range is not read at all
# when those before it filled the claim. Each range starts after the key of the last job
# this process claimed there (`claim_cursor`), past the dead entries claims leave behind.
# A paused queue (`queues.PAUSED`, a one-time check by primary key) claims nothing.
_ranges = (
    func.unnest(
        cast(bindparam("priorities"), ARRAY(SmallInteger())),
        cast(bindparam("after_run_ats"), ARRAY(DateTime(timezone=True))),
        cast(bindparam("after_ids"), ARRAY(PG_UUID(as_uuid=True))),
    )
    .table_valued("priority", "after_run_at", "after_id")
    .render_derived(name="ranges")
)
_picked = (
    select(jobs.c.id)
    .where(
        jobs.c.status == _status(Status.PENDING),
        jobs.c.queue == bindparam("queue", type_=Text()),
        jobs.c.priority == _ranges.c.priority,
        jobs.c.run_at <= func.now(),
        tuple_(jobs.c.run_at, jobs.c.id) > tuple_(_ranges.c.after_run_at, _ranges.c.after_id),
    )
    .order_by(jobs.c.run_at, jobs.c.id)
    .limit(bindparam("limit"))
    .with_for_update(skip_locked=True)
    .lateral("picked")
)
_due = (
    select(_picked.c.id)
    .select_from(_ranges.join(_picked, true()))
    .where(~PAUSED)
    .limit(bindparam("limit"))
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
        started_at=func.now(),
        worker=bindparam("worker", type_=Text()),
    )
    .returning(*jobs.c)
)
_CLAIM_SENT = DriverStatement(_CLAIM)


def _leases_with(name: str, **columns: TypeEngine[Any]) -> Any:
    """Rows of (id, token, *columns) from parallel array parameters (`_arrays` names them),
    one element per lease. The
    arrays are cast because unnest() is polymorphic: PostgreSQL cannot infer an untyped
    parameter's type there."""
    arrays: dict[str, ARRAY[Any]] = {
        "id": ARRAY(PG_UUID(as_uuid=True)),
        "token": ARRAY(BigInteger()),
        **{column: ARRAY(kind) for column, kind in columns.items()},
    }
    return (
        func.unnest(*(cast(bindparam(_BOUND + c), array) for c, array in arrays.items()))
        .table_valued(*arrays)
        .render_derived(name=name)
    )


def _held_by(rows: Any) -> ColumnElement[bool]:
    # Fenced by each row's own token and a live lease: a stale worker (its lease
    # recovered, the job claimed again) matches no row and is simply not returned.
    # `locked_until IS NOT NULL` is `status = 'processing'` by the table's CHECK
    # (lease_while_processing), also when rechecked on a newer row version, but unlike it
    # does not imply ix_jobs_lease_expiry's predicate, so the planner looks each id up in
    # pk_jobs. Given the status, it may read the whole lease index and join it to the
    # batch instead: cheap while few jobs are processing, but that index keeps an entry
    # for every job processed while a long transaction holds back the xmin horizon
    # (measured after a 60 s hold: 8-16 ms and ~2,900 buffers per batch, against
    # 0.14 ms and 60 buffers by key).
    return and_(
        jobs.c.id == rows.c.id,
        jobs.c.lease_token == rows.c.token,
        jobs.c.locked_until.is_not(None),
    )


# A prefix for the arrays' parameters: an UPDATE reserves the names of its table's columns.
_BOUND = "each_"


def _arrays(leases: Sequence[Lease], **columns: list[Any]) -> dict[str, list[Any]]:
    """The parameters of a `_leases_with` statement: the leases' ids and tokens, and one
    list per extra column, all in the leases' order."""
    arrays: dict[str, list[Any]] = {
        "id": [lease.job_id for lease in leases],
        "token": [lease.token for lease in leases],
        **columns,
    }
    return {_BOUND + column: values for column, values in arrays.items()}


# Every ending of every attempt in a batch is this one statement, whatever the mix of
# decisions; leaving processing always ends the lease. Due times come from the database
# clock, the one the claim compares with. The target status is bound, not inlined: only
# the WHERE clause must show the partial index its status.
_ending = _leases_with(
    "ending", status=Text(), error=Text(), delay=Interval(), refund=Integer(), snoozed=Integer()
)
# An attempt the job outlives is logged: a retry (back to pending, the attempt kept). A
# release gives the attempt back, and a final ending stays in the row's own columns.
_retried = and_(_ending.c.status == _status(Status.PENDING), _ending.c.refund == 0)
_RECORD_MANY = (
    update(jobs)
    .where(_held_by(_ending))
    .values(
        status=_ending.c.status,
        attempt_log=case(
            (_retried, logged(_literal(Outcome.RETRIED), _ending.c.error, func.now())),
            else_=jobs.c.attempt_log,
        ),
        last_error=func.coalesce(_ending.c.error, jobs.c.last_error),
        run_at=case((_ending.c.delay.is_(None), jobs.c.run_at), else_=func.now() + _ending.c.delay),
        # GREATEST only guards rows written by hand; a claim always counted one.
        attempts=func.greatest(jobs.c.attempts - _ending.c.refund, 0),
        snoozes=jobs.c.snoozes + _ending.c.snoozed,
        locked_until=None,
        updated_at=func.now(),
    )
    .returning(jobs.c.id, jobs.c.lease_token)
)
_RECORD_MANY_SENT = DriverStatement(_RECORD_MANY)

# A batch of endings and the next claim in one statement: one round trip and one commit
# where a busy pool would spend two. The two parts touch disjoint rows (the endings'
# jobs are processing in the statement's snapshot, the claim takes only pending ones),
# so neither sees nor needs the other's effects. The leases that held come back as two
# arrays on every row, and the claim's rows are LEFT JOINed so that a claim finding
# nothing still returns one row carrying them.
_ended = _RECORD_MANY.cte("ended")
_leases_held = select(
    func.array_agg(_ended.c.id).label("ended_ids"),
    func.array_agg(_ended.c.lease_token).label("ended_tokens"),
).subquery("held")
_claimed = _CLAIM.cte("claimed")
_RECORD_AND_CLAIM = select(_leases_held, _claimed).select_from(
    _leases_held.outerjoin(_claimed, true())
)
_RECORD_AND_CLAIM_SENT = DriverStatement(_RECORD_AND_CLAIM)

# Lease renewal: every held lease of a process in one statement, fenced like an outcome
# write; a lease not returned is no longer held (recovered, or superseded).
_held = _leases_with("held")
_RENEW = (
    update(jobs)
    .where(_held_by(_held))
    .values(locked_until=func.now() + bindparam("lease", type_=Interval()))
    .returning(jobs.c.id, jobs.c.lease_token)
)
_RENEW_SENT = DriverStatement(_RENEW)


def _ending_arrays(endings: Sequence[tuple[Lease, Decision]]) -> dict[str, list[Any]]:
    decisions = [decision for _, decision in endings]
    return _arrays(
        [lease for lease, _ in endings],
        status=[decision.status.value for decision in decisions],
        error=[decision.error for decision in decisions],
        delay=[decision.delay for decision in decisions],
        refund=[1 if decision.gives_back_attempt else 0 for decision in decisions],
        snoozed=[1 if decision.snoozed else 0 for decision in decisions],
    )


# An operator's retry: what it may start from (the statuses inlined, for their indexes),
# and what it writes. lease_token is left alone: it must keep growing so that claims from
# before the reset stay fenced even though attempt numbers start over. The final attempt
# moves from the row's columns to the log: it ended when the row was last written. A
# cancelled job has logged its attempts already (`holds_final_attempt`).
def _status_in(statuses: Iterable[Status]) -> ColumnElement[bool]:
    return jobs.c.status.in_([_status(status) for status in sorted(statuses)])


_RETRYABLE = _status_in(ACTIONABLE)
_HOLDS_FINAL = _status_in(status for status in ACTIONABLE if holds_final_attempt(status))
_RETRIED: dict[str, Any] = {
    "status": _status(Status.PENDING),
    "attempt_log": case(
        (_HOLDS_FINAL, logged(jobs.c.status, jobs.c.last_error, jobs.c.updated_at)),
        else_=jobs.c.attempt_log,
    ),
    "attempts": 0,
    "snoozes": 0,
    "run_at": func.now(),
    "updated_at": func.now(),
}


_CANCELLABLE = _status_in(CANCELLABLE)


def _selected(selection: Selection) -> Any:
    """The ids of the first jobs `selection` names, locked: its status's index read in its
    order (`TRAITS`, ascending: the oldest ended first, pending jobs as claims take them,
    running ones by lease end), narrowed by queue and type as it goes. SKIP LOCKED: a
    concurrent bulk call takes others, and neither waits. A finished or held row is never
    written by a worker, so only another operator can hold it; a running one is skipped
    while its worker writes its ending."""
    order = TRAITS[selection.status].order
    keys = [*(jobs.c[group] for group in order.groups), jobs.c[order.column.value]]
    conditions = [jobs.c.status == _status(selection.status)]
    if selection.queue is not None:
        conditions.append(jobs.c.queue == selection.queue)
    if selection.type is not None:
        conditions.append(jobs.c.type == selection.type)
    return (
        select(jobs.c.id)
        .where(*conditions)
        .order_by(*keys)
        .limit(selection.limit)
        .with_for_update(skip_locked=True)
        .cte("selected")
        .prefix_with("MATERIALIZED")
    )


@contextmanager
def _unique_key_held(job_id: UUID | None) -> Iterator[None]:
    """An operator's retry that met `uq_jobs_unique_key` raises `UniqueKeyHeld`: the job
    (`job_id`, or one of those selected) has a unique key a live job holds now."""
    try:
        yield
    except StoreError as error:
        if error.sqlstate != _UNIQUE_VIOLATION:
            raise
        raise UniqueKeyHeld(job_id) from error


def _check_claim(limit: int, lease: timedelta) -> None:
    if limit < 1:
        raise ValueError(f"claim limit must be at least 1, got {limit}")
    if lease <= timedelta(0):
        raise ValueError(f"lease must be positive, got {lease}")


_PRIORITY_LIST = list(PRIORITIES)


def _claim_values(
    worker: str, queue: str, limit: int, lease: timedelta, after: Keys
) -> dict[str, object]:
    return {
        "worker": worker,
        "queue": queue,
        "limit": limit,
        "lease": lease,
        "priorities": _PRIORITY_LIST,
        "after_run_ats": [run_at for run_at, _ in after],
        "after_ids": [job_id for _, job_id in after],
    }


def _claim_order(job: Job) -> tuple[int, datetime, UUID]:
    return job.priority, job.run_at, job.id


class PostgresJobStore:
    """`JobStore` on PostgreSQL through a SQLAlchemy async engine (asyncpg)."""

    def __init__(self, engine: AsyncEngine, *, worker: str | None = None) -> None:
        self._engine = engine
        # Who claims, as the attempt log shows it: this process, unless told otherwise.
        self._worker = worker if worker is not None else f"{gethostname()}:{getpid()}"
        # Every operation is one statement, atomic on its own: an explicit transaction
        # would only add a BEGIN and a COMMIT round trip to each. Shares engine's pool.
        self._autocommit = autocommit(engine)
        self._cursors: defaultdict[str, ClaimCursor] = defaultdict(ClaimCursor)
        self._queues = PostgresQueues(engine)

    @property
    def worker(self) -> str:
        """This process as the attempt log names it (and its published job types)."""
        return self._worker

    async def submit(self, new: NewJob) -> Submitted:
        # Announced by the caller (the API's coalescing notifier), not per statement.
        return await submit_pooled(self._engine, new)

    async def submit_many(self, news: Sequence[NewJob]) -> Sequence[Submitted]:
        # One transaction of its own; announced by the caller, as `submit` is.
        return await enqueue_many(self._engine, news, announce=False)

    async def get(self, job_id: UUID) -> Job:
        row = await self._one(select(jobs).where(jobs.c.id == job_id))
        if row is None:
            raise JobNotFound(job_id)
        return job_from_row(row)

    async def claim(
        self, limit: int, lease: timedelta, queue: str = DEFAULT_QUEUE
    ) -> Sequence[Job]:
        _check_claim(limit, lease)
        after = self._cursors[queue].after()
        rows = await self._fetch(
            _CLAIM_SENT, _claim_values(self._worker, queue, limit, lease, after)
        )
        claimed = [job_from_row(row) for row in rows]
        return await self._claimed(queue, claimed, limit, lease, after)

    async def record_many(self, endings: Sequence[tuple[Lease, Decision]]) -> set[Lease]:
        if not endings:
            return set()
        return await self._leases(_RECORD_MANY_SENT, _ending_arrays(endings))

    async def record_and_claim(
        self,
        endings: Sequence[tuple[Lease, Decision]],
        limit: int,
        lease: timedelta,
        queue: str = DEFAULT_QUEUE,
    ) -> tuple[set[Lease], Sequence[Job]]:
        _check_claim(limit, lease)
        if not endings:
            return set(), await self.claim(limit, lease, queue)
        after = self._cursors[queue].after()
        parameters = {
            **_ending_arrays(endings),
            **_claim_values(self._worker, queue, limit, lease, after),
        }
        rows = await self._fetch(_RECORD_AND_CLAIM_SENT, parameters)
        first = rows[0]
        held = {
            Lease(job_id, token)
            for job_id, token in zip(
                first["ended_ids"] or (), first["ended_tokens"] or (), strict=True
            )
        }
        claimed = [job_from_row(row) for row in rows if row["id"] is not None]
        return held, await self._claimed(queue, claimed, limit, lease, after)

    async def _claimed(
        self, queue: str, claimed: list[Job], limit: int, lease: timedelta, after: Keys
    ) -> list[Job]:
        """What a claim from `after` returned, topped up from the start of the due index
        when it came back short: jobs due behind the cursor (released, or committed late)
        are then claimed at once, not a poll later."""
        if len(claimed) < limit and after != FROM_START:
            values = _claim_values(self._worker, queue, limit - len(claimed), lease, FROM_START)
            try:
                rows = await self._fetch(_CLAIM_SENT, values)
            except (StoreUnavailable, StoreError):
                # The first claim is committed: its jobs must reach the pool whatever
                # happens to this one. The next claim starts over (nothing moved on).
                rows = []
            claimed += [job_from_row(row) for row in rows]
        claimed.sort(key=_claim_order)
        self._cursors[queue].claimed(claimed, limit)
        return claimed

    async def renew(self, leases: Sequence[Lease], lease: timedelta) -> set[Lease]:
        if lease <= timedelta(0):
            raise ValueError(f"lease must be positive, got {lease}")
        if not leases:
            return set()
        parameters = {**_arrays(leases), "lease": lease}
        return await self._leases(_RENEW_SENT, parameters)

    async def retry(self, job_id: UUID) -> Job:
        statement = (
            update(jobs)
            .where(jobs.c.id == job_id, _RETRYABLE)
            .values(**_RETRIED)
            .returning(*jobs.c)
        )
        with _unique_key_held(job_id):
            return await self._transition(statement, job_id, Operation.RETRY, ACTIONABLE)

    async def cancel(self, job_id: UUID) -> Job:
        # Locked first, so that `was` is the status the cancel replaced.
        target = (
            select(jobs.c.id, jobs.c.status.label("was"))
            .where(jobs.c.id == job_id, _CANCELLABLE)
            .with_for_update()
            .cte("target")
            .prefix_with("MATERIALIZED")
        )
        return await self._transition(cancelling(target), job_id, Operation.CANCEL, CANCELLABLE)

    async def cancel_many(self, selection: Selection) -> int:
        selection.require(Operation.CANCEL)
        picked = _selected(selection)
        target = select(picked.c.id, _status(selection.status).label("was")).cte("target")
        async with self._connection() as connection:
            return len((await connection.execute(cancelling(target, whole=False))).all())

    async def _transition(
        self,
        statement: Executable,
        job_id: UUID,
        operation: Operation,
        allowed: frozenset[Status],
    ) -> Job:
        """Run `statement`, an operator's transition of one job returning the job; when it
        matched no row, raise the error its current status explains."""
        status: str | None = None
        for _ in range(_REFUSAL_ROUNDS):
            row = await self._one(statement)
            if row is not None:
                return job_from_row(row)
            status = await self._status_of(job_id)
            if status is None:
                raise JobNotFound(job_id)
            if status not in allowed:
                break
        raise InvalidTransition(job_id, operation, str(status))

    async def retry_many(self, selection: Selection) -> int:
        selection.require(Operation.RETRY)
        picked = _selected(selection)
        statement = update(jobs).where(jobs.c.id == picked.c.id).values(**_RETRIED)
        # All or nothing: one selected job's unique key held by a live job refuses all.
        with _unique_key_held(None):
            async with self._connection() as connection:
                return (await connection.execute(statement)).rowcount

    async def discard_many(self, selection: Selection) -> int:
        # `= ANY(ARRAY(…))`, as retention deletes: the ids are collected first, then
        # looked up in the primary key.
        selection.require(Operation.RETRY)
        doomed = jobs.c.id == any_(func.array(select(_selected(selection).c.id).scalar_subquery()))
        async with self._connection() as connection:
            return (await connection.execute(delete(jobs).where(doomed))).rowcount

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
                # Back to pending, the job outlives the attempt: it is logged. A last one
                # stays in the row, dead-lettered.
                attempt_log=case(
                    (last_attempt, jobs.c.attempt_log),
                    else_=logged(
                        _literal(LEASE_EXPIRED), _literal(LEASE_EXPIRED_ERROR), func.now()
                    ),
                ),
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
        # One locking scan per status, so a status kept long never slows the pruning of
        # another: type by type (`by_type`), each type's oldest first, at most `limit` in
        # all; the outer LIMIT keeps the oldest `limit` of the statuses' batches. Within a
        # status the batch is the oldest of each type in turn, not the oldest of all:
        # what retention needs is only that every batch is old enough and bounded.
        # SKIP LOCKED: processes pruning at once take different rows. A finished row is
        # never updated, so nothing but another pruner (or an operator) holds its lock.
        aged = [
            per_type(
                types_of(status, f"types_{status.value}"),
                select(jobs.c.id, jobs.c.updated_at)
                .where(
                    jobs.c.status == _status(status),
                    jobs.c.updated_at < func.now() - _interval(age),
                )
                .order_by(jobs.c.updated_at)
                .with_for_update(skip_locked=True),
                limit,
            )
            .limit(limit)
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
        async with self._connection(self._engine) as connection, connection.begin():
            result = await connection.execute(delete(jobs).where(doomed))
            return result.rowcount

    async def list_jobs(self, query: JobQuery) -> JobPage:
        order = query.order
        column = jobs.c[order.column.value]
        groups = [jobs.c[name] for name in order.groups]
        # The status inlined, so that the status's partial index serves the statement.
        conditions = [jobs.c.status == _status(query.status)]
        if query.type is not None:
            conditions.append(jobs.c.type == query.type)
        if query.queue is not None:
            # For pending jobs the index's first column: the listing is that queue's range.
            conditions.append(jobs.c.queue == query.queue)
        if query.after is not None:
            key, job_id = query.after.key, query.after.job_id
            if groups:
                # A row comparison over the index's own columns, in its order: the index
                # seeks to it (grouped orders are ascending).
                conditions.append(
                    tuple_(*groups, column, jobs.c.id) > tuple_(*query.after.groups, key, job_id)
                )
            # Spelled out rather than as a row comparison: the bound on the sort column
            # alone is what the index can seek to; the id only settles ties at the boundary.
            elif order.descending:
                conditions += [column <= key, or_(column < key, jobs.c.id < job_id)]
            else:
                conditions += [column >= key, or_(column > key, jobs.c.id > job_id)]
        ordering = (
            (column.desc(), jobs.c.id.desc()) if order.descending else (*groups, column, jobs.c.id)
        )
        # One row more than the page: whether it exists says if there is a next page.
        wanted = query.limit + 1
        ranged = select(jobs).where(*conditions).order_by(*ordering)
        if TRAITS[query.status].typed_index and query.type is None:
            # Every type: the page of each type's range, merged (`by_type`).
            merged = per_type(types_of(query.status, "listed_types"), ranged, wanted)
            picked = merged.selected_columns
            statement = merged.order_by(picked[column.name].desc(), picked.id.desc()).limit(wanted)
        else:
            statement = ranged.limit(wanted)
        listed = await self._all(statement)
        page = tuple(listed[: query.limit])
        following = len(listed) > query.limit
        return JobPage(page, position_of(page[-1]) if following else None)

    async def pause_queue(self, queue: str) -> QueueState:
        return await self._queues.set_paused(queue, True)

    async def resume_queue(self, queue: str) -> QueueState:
        return await self._queues.set_paused(queue, False)

    async def paused_queues(self, queues: Sequence[str]) -> set[str]:
        return await self._queues.paused(queues)

    async def queue_summaries(self) -> Sequence[QueueSummary]:
        return await self._queues.summaries()

    async def ping(self) -> None:
        async with self._connection(self._engine) as connection:
            await connection.execute(text("SELECT 1"))

    async def _leases(
        self, statement: DriverStatement, parameters: Mapping[str, Any]
    ) -> set[Lease]:
        rows = await self._fetch(statement, parameters)
        return {Lease(job_id, token) for job_id, token in rows}

    async def _fetch(
        self, statement: DriverStatement, parameters: Mapping[str, Any]
    ) -> Sequence[asyncpg.Record]:
        """A hot-path statement on its own, in autocommit, on the driver
        (`driver.fetch_pooled`), its failures made domain errors."""
        with store_failures():
            return await fetch_pooled(self._engine, statement, parameters)

    @asynccontextmanager
    async def _connection(
        self, engine: AsyncEngine | None = None
    ) -> AsyncIterator[AsyncConnection]:
        """A connection for one statement (autocommit unless `engine` says otherwise), its
        failures made domain errors."""
        with store_failures():
            async with (engine or self._autocommit).connect() as connection:
                yield connection

    async def _status_of(self, job_id: UUID) -> str | None:
        row = await self._one(select(jobs.c.status).where(jobs.c.id == job_id))
        return None if row is None else str(row["status"])

    async def _one(
        self, statement: Executable, parameters: Mapping[str, Any] | None = None
    ) -> RowMapping | None:
        async with self._connection() as connection:
            result = await connection.execute(statement, parameters)
            return result.mappings().one_or_none()

    async def _all(
        self, statement: Executable, parameters: Mapping[str, Any] | None = None
    ) -> list[Job]:
        async with self._connection() as connection:
            result = await connection.execute(statement, parameters)
            return [job_from_row(row) for row in result.mappings()]
