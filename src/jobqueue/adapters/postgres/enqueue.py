"""In-process enqueue: jobs inserted inside the caller's own connection and transaction.

The jobs exist if and only if the caller's transaction commits, so they can be enqueued
atomically with the application's own writes. `PostgresJobStore.submit` uses the same
statement in autocommit.

Announcing. Idle workers in other processes learn of the jobs from a NOTIFY sent by the
insert statement itself: PostgreSQL delivers it when, and only if, the transaction
commits (never before the jobs are visible, never for a rollback), and costs no extra
round trip. PostgreSQL folds identical notifications of one transaction into one, so a
transaction that enqueues many jobs, in one call or in many, notifies once. A NOTIFY does
make commits take a global lock in turn, which caps transactions that notify at a few
thousand per second on one server (measured: ~4,750/s); `announce=False` leaves it out
for producers that enqueue faster than that in separate transactions, or whose workers
do not listen (`NOTIFY=false`): workers then find the jobs at their next poll.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import fields
from datetime import datetime
from operator import attrgetter
from typing import Any
from uuid import UUID
from weakref import WeakKeyDictionary

from sqlalchemy import (
    ARRAY,
    BigInteger,
    ColumnElement,
    DateTime,
    Integer,
    Interval,
    SmallInteger,
    Text,
    and_,
    any_,
    bindparam,
    case,
    cast,
    func,
    literal,
    select,
)
from sqlalchemy.dialects.postgresql import JSONB, insert
from sqlalchemy.dialects.postgresql import UUID as PG_UUID
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.pool import Pool

from jobqueue.adapters.payloads import MsgspecPayloadDecoder
from jobqueue.adapters.postgres.database import autocommit
from jobqueue.adapters.postgres.driver import DriverStatement, driver_of, fetch_pooled
from jobqueue.adapters.postgres.failures import refused_values, store_failures
from jobqueue.adapters.postgres.ids import time_ordered_ids
from jobqueue.adapters.postgres.notify import ANNOUNCE, Notifier, pg_notify
from jobqueue.adapters.postgres.rows import job_from_row
from jobqueue.adapters.postgres.schema import jobs
from jobqueue.domain.errors import IdempotencyConflict, InvalidJob, StoreUnavailable
from jobqueue.domain.job import DEFAULT_PRIORITY, DEFAULT_QUEUE, Job, JsonValue, NewJob
from jobqueue.domain.ports import Submitted
from jobqueue.domain.registry import Registry
from jobqueue.domain.status import Status

_NEW_JOB_FIELDS = tuple(field.name for field in fields(NewJob))
_JOB_FIELDS = tuple(field.name for field in fields(Job))
# A bulk call is one statement; past this it is split, so that one call cannot build a
# statement the server must hold in memory whole (ten thousand jobs is ~ten MB of JSON).
MAX_BULK = 10_000

# Rounds of insert-then-look-up a submission may take: a conflicting job can leave the
# statuses its key counts in (or be deleted) between the two; a few settle any race.
_CONFLICT_ROUNDS = 3


def _slotted(key: ColumnElement[Any], period: ColumnElement[Any]) -> ColumnElement[Any]:
    """A unique key as stored: with the number of its period's slot (from the Unix epoch,
    by the statement's clock) when it has a period; `NewJob.stored_unique_key` says the
    same for the job returned."""
    slot = func.floor(func.extract("epoch", func.now()) / func.extract("epoch", period))
    return case(
        (period.is_(None), key),
        else_=key.concat(literal("@")).concat(cast(cast(slot, BigInteger), Text)),
    )


def _announcing(inserted: Any) -> Any:
    """`SELECT` the inserted rows, plus one NOTIFY for the statement: an uncorrelated
    scalar subquery is evaluated once, and only when there is a row to return."""
    rows = inserted.cte("inserted")
    notify = select(ANNOUNCE).scalar_subquery().label("announced")
    return select(*rows.c, notify)


# What an insert reads back: the id and the clock the job was stored at. Every other
# column of a new job is a server default, which is what `NewJob.stored(id, now)` gives
# (tests hold the two equal), or the caller's own value: reading the row whole would
# decode the payload just sent (~5 % of a single enqueue's client time, and more than
# the insert itself for a thousand jobs).
_STORED_AT = (jobs.c.id, jobs.c.created_at)


def _stored(new: NewJob, row: Any) -> Job:
    # `row` is `_STORED_AT` by position (then `announced`, when the statement notified).
    return new.stored(row[0], row[1])


def _due(run_at: ColumnElement[Any], delay: ColumnElement[Any]) -> ColumnElement[Any]:
    """When a new job is due: at its `run_at`, or `delay` after the statement's clock, or
    at once. On the server, so that a delay counts on the clock claims compare with."""
    return func.coalesce(run_at, func.now() + delay, func.now())


# One bound value per NewJob field, typed by the table's column of the same name, but the
# payload as JSON text cast by the server (the driver path, `PostgresJobStore.submit` and
# `enqueue(engine)`, skips exactly SQLAlchemy's JSONB conversion, and one statement
# serves both paths), and the schedule (`run_at`, `delay`) made the one column it sets.
_SCHEDULE = ("run_at", "delay")
_UNIQUE = ("unique_key", "unique_period")
# ON CONFLICT DO NOTHING with no target: an Idempotency-Key or a unique key may conflict,
# each with its own index; which one did is found out after (`_resolved`).
_SUBMIT = (
    insert(jobs)
    .values(
        {
            **{
                name: cast(bindparam(name, type_=Text()), JSONB)
                if name == "payload"
                else bindparam(name, type_=jobs.c[name].type)
                for name in _NEW_JOB_FIELDS
                if name not in (*_SCHEDULE, *_UNIQUE, "unique_states")
            },
            # Untyped, then cast: SQLAlchemy's ARRAY type would convert the value first.
            "unique_states": cast(bindparam("unique_states"), ARRAY(Text())),
            "run_at": _due(
                bindparam("run_at", type_=DateTime(timezone=True)),
                bindparam("delay", type_=Interval()),
            ),
            "unique_key": _slotted(
                bindparam("unique_key", type_=Text()), bindparam("unique_period", type_=Interval())
            ),
        }
    )
    .on_conflict_do_nothing()
    .returning(*_STORED_AT)
)
_SUBMIT_ANNOUNCED = _announcing(_SUBMIT)
_SUBMIT_SENT = DriverStatement(_SUBMIT)
_SUBMIT_SENT_ANNOUNCED = DriverStatement(_SUBMIT_ANNOUNCED)

# Many jobs: one row per element of parallel arrays. The ids are made here, so that each
# returned row is matched to its submission whatever order the server returns them in.
_BULK_COLUMNS: dict[str, ARRAY[Any]] = {
    "id": ARRAY(PG_UUID(as_uuid=True)),
    "type": ARRAY(Text()),
    # As JSON text, cast to jsonb by the server: asyncpg does not encode a jsonb[] of
    # Python values, and one `json.dumps` per job is what a single insert costs anyway.
    "payload": ARRAY(Text()),
    "max_attempts": ARRAY(Integer()),
    "idempotency_key": ARRAY(Text()),
    "traceparent": ARRAY(Text()),
    "run_at": ARRAY(DateTime(timezone=True)),
    "delay": ARRAY(Interval()),
    "queue": ARRAY(Text()),
    "priority": ARRAY(SmallInteger()),
    "unique_key": ARRAY(Text()),
    # Each job's statuses joined by commas: an array of arrays cannot be unnested by row.
    "unique_states": ARRAY(Text()),
    "unique_period": ARRAY(Interval()),
}
_bulk_rows = (
    func.unnest(*(cast(bindparam(f"each_{c}"), kind) for c, kind in _BULK_COLUMNS.items()))
    .table_valued(*_BULK_COLUMNS)
    .render_derived(name="submitted")
)
_AS_GIVEN = [
    name for name in _BULK_COLUMNS if name not in ("payload", "unique_states", *_SCHEDULE, *_UNIQUE)
]
_SUBMIT_MANY = (
    insert(jobs)
    .from_select(
        [*_AS_GIVEN, "payload", "run_at", "unique_key", "unique_states"],
        select(*(_bulk_rows.c[name] for name in _AS_GIVEN)).add_columns(
            cast(_bulk_rows.c.payload, JSONB),
            _due(_bulk_rows.c.run_at, _bulk_rows.c.delay),
            _slotted(_bulk_rows.c.unique_key, _bulk_rows.c.unique_period),
            func.string_to_array(_bulk_rows.c.unique_states, literal(",")),
        ),
    )
    .on_conflict_do_nothing()
    .returning(*_STORED_AT)
)
_SUBMIT_MANY_ANNOUNCED = _announcing(_SUBMIT_MANY)


async def enqueue(
    connection: AsyncConnection | AsyncEngine,
    new: NewJob,
    *,
    announce: bool = True,
    registry: Registry | None = None,
) -> Submitted:
    """Submit `new` inside the caller's connection and transaction, or on its own.

    Given the `registry` of the workers' handlers, `new` is first checked as `POST /jobs`
    checks a submission: `UnknownJobType` for a type it has no handler for,
    `InvalidPayload` for a payload its declared payload type does not fit (both
    `InvalidJob`, the errors HTTP answers with 400), before anything is sent.

    Given a connection, the job is enqueued atomically with your own writes: it exists if
    and only if the caller's transaction commits, and idle workers are told when it does
    (see the module's doc for `announce`). Given an engine, the job is committed at once
    by one statement on a pooled connection (one round trip), and idle workers are told
    through a wake-up coalesced per engine (at most one NOTIFY per 2 ms): carried by the
    insert itself when none was sent in the last interval, else sent at the interval's
    end in a transaction of its own, so at most one commit per interval takes the
    notification lock.
    Duplicate Idempotency-Keys are safe under concurrency: the unique index decides the
    winner, the others read the winner's job back. Raises `InvalidJob` for a value
    PostgreSQL refuses, `IdempotencyConflict` for a key used by a different request,
    `StoreUnavailable` when the database fails.
    """
    if registry is not None:
        _checked(registry, (new,))
    if isinstance(connection, AsyncEngine):
        return await _enqueue_committed(connection, new, announce)
    statement = _SUBMIT_ANNOUNCED if announce else _SUBMIT
    with store_failures(), refused_values():
        for _ in range(_CONFLICT_ROUNDS):
            inserted = await connection.execute(statement, _values(new))
            row = inserted.one_or_none()
            if row is not None:
                return Submitted(_stored(new, row), replayed=False)
            resolved = await _resolved(connection, new)
            if resolved is not None:
                return resolved
        raise _unsettled(new)


async def enqueue_many(
    connection: AsyncConnection | AsyncEngine,
    news: Sequence[NewJob],
    *,
    announce: bool = True,
    registry: Registry | None = None,
) -> list[Submitted]:
    """Submit every job of `news` inside the caller's connection and transaction, or on
    its own; return their `Submitted`, in the order given. Given a `registry`, every job
    is checked first, as by `enqueue`: one that fails fails the call, before any is sent.

    Like `enqueue`, job for job: all or none exist once the transaction ends (given an
    engine, the call is one transaction of its own), idle workers are told once, and a job
    whose Idempotency-Key is taken is answered with the job holding it (`replayed`), or
    refused with `IdempotencyConflict` when that job is a different request (which fails
    the whole call: the caller's transaction should then roll back). The returned jobs
    carry the caller's payload objects as given.

    Jobs without an Idempotency-Key or a unique key are written by COPY, a third of the
    server's time of an INSERT (measured); a call where any job has a key is one
    `INSERT ... ON CONFLICT` per `MAX_BULK` jobs instead, since only an INSERT can meet a
    conflict. A unique job whose key is held (by a job in the table, or one earlier in
    the same call) is answered with the job holding it (`duplicate`).
    """
    for new in news:
        if not isinstance(new, NewJob):
            raise InvalidJob(f"enqueue_many takes NewJob values, got a {type(new).__name__}")
    if registry is not None:
        _checked(registry, news)
    if isinstance(connection, AsyncEngine):
        with store_failures():
            async with connection.begin() as own:
                return await enqueue_many(own, news, announce=announce)
    if not news:
        return []
    if all(new.idempotency_key is None and new.unique_key is None for new in news):
        return await _copy(connection, news, announce)
    submitted: list[Submitted] = []
    for start in range(0, len(news), MAX_BULK):
        submitted += await _insert_batch(connection, news[start : start + MAX_BULK], announce)
    return submitted


# In the caller's transaction, COPY writes only what the submissions hold (and their ids):
# every other column of a new job is the server's default, which is what `NewJob.stored`
# gives (pending, no attempt, never leased, stamped `now()`: the transaction's clock, read
# first, and due then unless scheduled, a delay counting from that clock). A column whose
# every value is its default is left out as well. Half
# the columns to encode and send cuts the client's and the server's time per row alike
# (measured: 67k -> 100k rows/s for COPY alone). Outside a transaction (an autocommit
# connection), the clock read is a statement of its own, so every column is sent with the
# values read, and what the caller is returned is still exactly what was written.
# Written by claims and endings, never by a submission: NULL in every new row.
_CLAIMED_ONLY = ("started_at", "worker", "attempt_log")
# Only unique jobs set these, and those are never copied (a COPY cannot meet a conflict).
_UNIQUE_ONLY = ("unique_key", "unique_states")
_COPIED = tuple(
    name for name in _JOB_FIELDS if name not in ("payload", "status", *_CLAIMED_ONLY, *_UNIQUE_ONLY)
)
_COPY_COLUMNS = ("payload", "status", *_COPIED)
_copied_values = attrgetter(*_COPIED)
# The clock the jobs are stored at, read first: in the caller's transaction, this is the
# statement that opens it (SQLAlchemy begins on first execute, not on COPY). NOTIFY here
# is delivered, like the insert's, on commit only.
_CLOCK = select(func.now())
_CLOCK_ANNOUNCED = _CLOCK.add_columns(ANNOUNCE)


async def _copy(
    connection: AsyncConnection, news: Sequence[NewJob], announce: bool
) -> list[Submitted]:
    with store_failures(), refused_values():
        clock = await connection.execute(_CLOCK_ANNOUNCED if announce else _CLOCK)
        now = clock.scalar_one()
        ids = time_ordered_ids(len(news))
        async with driver_of(connection) as driver:
            if not driver.is_in_transaction():
                stored = [new.stored(job_id, now) for job_id, new in zip(ids, news, strict=True)]
                await driver.copy_records_to_table(
                    jobs.name, records=_every_column(stored), columns=_COPY_COLUMNS
                )
                return [Submitted(job, replayed=False) for job in stored]
            columns, records = _submitted_records(ids, news, now)
            # The server writes the rows while this process builds the jobs it returns
            # (a seventh of a bulk call's client time, measured), rather than after.
            copying = asyncio.ensure_future(
                driver.copy_records_to_table(jobs.name, records=records, columns=columns)
            )
            try:
                submitted = await _stored_meanwhile(ids, news, now)
            except BaseException:
                # Cancelled: so is the COPY, before the connection is given up.
                copying.cancel()
                await asyncio.gather(copying, return_exceptions=True)
                raise
            await copying
            return submitted


# Jobs built between two turns of the event loop while a COPY is on its way: the first
# turn lets it send its statement, a later one its rows once the server is ready for them.
_BUILT_PER_TURN = 200


async def _stored_meanwhile(
    ids: Sequence[UUID], news: Sequence[NewJob], now: datetime
) -> list[Submitted]:
    submitted: list[Submitted] = []
    for start in range(0, len(news), _BUILT_PER_TURN):
        await asyncio.sleep(0)
        end = start + _BUILT_PER_TURN
        submitted += [
            Submitted(new.stored(job_id, now), replayed=False)
            for job_id, new in zip(ids[start:end], news[start:end], strict=True)
        ]
    return submitted


def _submitted_records(
    ids: Sequence[UUID], news: Sequence[NewJob], now: datetime
) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
    # Built column by column, then zipped into rows. The keyless path: `idempotency_key`
    # is always its default (NULL) here.
    columns: dict[str, Sequence[Any]] = {
        "id": ids,
        "type": [new.type for new in news],
        "max_attempts": [new.max_attempts for new in news],
    }
    if any(type(new.payload) is not dict or new.payload for new in news):
        columns["payload"] = [_json_text(new.payload) for new in news]
    if any(new.traceparent is not None for new in news):
        columns["traceparent"] = [new.traceparent for new in news]
    # One pass for the three rarely set columns, each sent only when some job sets it.
    placed = {(new.run_at is not None or bool(new.delay), new.queue, new.priority) for new in news}
    if any(scheduled for scheduled, _, _ in placed):
        columns["run_at"] = [new.due_at(now) for new in news]
    if any(queue != DEFAULT_QUEUE for _, queue, _ in placed):
        columns["queue"] = [new.queue for new in news]
    if any(priority != DEFAULT_PRIORITY for _, _, priority in placed):
        columns["priority"] = [new.priority for new in news]
    return tuple(columns), list(zip(*columns.values(), strict=True))


def _every_column(stored: Sequence[Job]) -> list[tuple[Any, ...]]:
    pending = Status.PENDING.value
    return [(_json_text(job.payload), pending, *_copied_values(job)) for job in stored]


def _lock_order(new: NewJob) -> tuple[str, str]:
    return (new.idempotency_key or "", new.unique_key or "")


async def _insert_batch(
    connection: AsyncConnection, news: Sequence[NewJob], announce: bool
) -> list[Submitted]:
    # Ids in the order given (claims take equal jobs by id), rows in the order of their
    # keys: two calls whose keys overlap then wait for each other's keys in one order,
    # and the second waits for the first instead of deadlocking with it.
    ids = time_ordered_ids(len(news))
    order = sorted(range(len(news)), key=lambda i: _lock_order(news[i]))
    placed = [news[i] for i in order]
    parameters = {
        "each_id": [ids[i] for i in order],
        "each_type": [new.type for new in placed],
        "each_payload": [_json_text(new.payload) for new in placed],
        "each_max_attempts": [new.max_attempts for new in placed],
        "each_idempotency_key": [new.idempotency_key for new in placed],
        "each_traceparent": [new.traceparent for new in placed],
        "each_run_at": [new.run_at for new in placed],
        "each_delay": [new.delay for new in placed],
        "each_queue": [new.queue for new in placed],
        "each_priority": [new.priority for new in placed],
        "each_unique_key": [new.unique_key for new in placed],
        "each_unique_states": [
            None if new.unique_states is None else ",".join(new.unique_states) for new in placed
        ],
        "each_unique_period": [new.unique_period for new in placed],
    }
    statement = _SUBMIT_MANY_ANNOUNCED if announce else _SUBMIT_MANY
    with store_failures(), refused_values():
        result = await connection.execute(statement, parameters)
        # Plain rows, by position (`_STORED_AT`'s order): a mapping per row costs more.
        decided: dict[UUID, Any] = {row[0]: row for row in result.all()}
        submitted: list[Submitted] = []
        for job_id, new in zip(ids, news, strict=True):
            row = decided.get(job_id)
            if row is not None:
                submitted.append(Submitted(_stored(new, row), replayed=False))
                continue
            resolved = await _resolved(connection, new)
            if resolved is None:
                # The conflicting job left in between: this one goes in on its own.
                resolved = await enqueue(connection, new, announce=announce)
            submitted.append(resolved)
        return submitted


def _checked(registry: Registry, news: Sequence[NewJob]) -> None:
    # The decoder HTTP submissions are checked with, made once per call: it holds nothing.
    decoder = MsgspecPayloadDecoder()
    for new in news:
        registry.check(new.type, new.payload, decoder)


# `json`, not msgspec (5x faster): msgspec writes NaN as null, changing the data of a
# NewJob made without `build`. NaN is refused here, a lone surrogate by the server
# (escaped by `ensure_ascii`), as the SQLAlchemy path refuses them. One encoder, made
# once: `json.dumps` with arguments makes a new one per call, at twice the cost.
_encode_json = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def _json_text(payload: JsonValue) -> str:
    try:
        return _encode_json(payload)
    except ValueError as error:
        raise InvalidJob(f"the job store refused the job: payload is not JSON ({error})") from None


async def _enqueue_committed(engine: AsyncEngine, new: NewJob, announce: bool) -> Submitted:
    notifier = _notifier_of(engine) if announce else None
    # A quiet notifier lets the insert itself notify: the wake-up then leaves with the
    # commit, in the same round trip, and cannot be lost by a producer that drops its
    # engine (or its event loop) right after the call. At higher rates only one insert
    # per interval notifies, so commits seldom queue for the notification lock.
    carried = notifier is not None and notifier.carry()
    submitted = await submit_pooled(engine, new, announced=carried)
    if notifier is not None and not carried and not submitted.replayed:
        notifier.job_available()
    return submitted


# One wake-up notifier per engine and event loop, made and started on first use; its task
# runs only while a wake-up is owed, so nothing is left pending when the engine goes.
_NOTIFIERS: WeakKeyDictionary[Pool, dict[asyncio.AbstractEventLoop, Notifier]] = WeakKeyDictionary()


def _notifier_of(engine: AsyncEngine) -> Notifier:
    loop = asyncio.get_running_loop()
    by_loop = _NOTIFIERS.setdefault(engine.sync_engine.pool, {})
    notifier = by_loop.get(loop)
    if notifier is None:
        for stale in [each for each in by_loop if each.is_closed()]:
            del by_loop[stale]
        notifier = by_loop[loop] = Notifier(pg_notify(engine))
        notifier.start()
    return notifier


async def submit_pooled(engine: AsyncEngine, new: NewJob, *, announced: bool = False) -> Submitted:
    """`enqueue` in autocommit on a connection of `engine`'s pool, on the driver
    (`driver.fetch_pooled`), without the wake-up unless `announced` (the insert then
    notifies at its commit): what `enqueue(engine)` and the HTTP path call."""
    statement = _SUBMIT_SENT_ANNOUNCED if announced else _SUBMIT_SENT
    with store_failures():
        for _ in range(_CONFLICT_ROUNDS):
            with refused_values():
                rows = await fetch_pooled(engine, statement, _values(new))
            if rows:
                return Submitted(_stored(new, rows[0]), replayed=False)
            # Only on a key conflict: the read that explains it runs after the insert saw
            # the winner, and needs no transaction.
            async with autocommit(engine).connect() as connection:
                resolved = await _resolved(connection, new)
            if resolved is not None:
                return resolved
        raise _unsettled(new)


def _values(new: NewJob) -> dict[str, object]:
    """The insert's parameters for `new`: its fields (each the column of the same name),
    the payload as JSON text."""
    values: dict[str, object] = {name: getattr(new, name) for name in _NEW_JOB_FIELDS}
    values["payload"] = _json_text(new.payload)
    if new.unique_states is not None:
        values["unique_states"] = list(new.unique_states)
    return values


# The name the first releases documented; kept so that code written against them runs.
submit_in = enqueue


async def _resolved(connection: AsyncConnection, new: NewJob) -> Submitted | None:
    """The answer to a submission that inserted nothing: the job its Idempotency-Key
    replays, or the job holding its unique key (a duplicate). None when neither exists
    any more (it was deleted, or left the statuses the key counts in): insert again."""
    if new.idempotency_key is not None:
        replayed = await _replay(connection, new, new.idempotency_key)
        if replayed is not None:
            return replayed
    if new.unique_key is not None:
        holder = await connection.execute(
            select(jobs).where(
                jobs.c.unique_key
                == _slotted(
                    literal(new.unique_key, Text()), literal(new.unique_period, Interval())
                ),
                jobs.c.status == any_(jobs.c.unique_states),
            )
        )
        row = holder.mappings().one_or_none()
        if row is not None:
            return Submitted(job_from_row(row), replayed=False, duplicate=True)
    return None


def _unsettled(new: NewJob) -> StoreUnavailable:
    held = "Idempotency-Key" if new.idempotency_key is not None else "unique key"
    return StoreUnavailable(
        f"the job holding this submission's {held} kept changing during it; submit again"
    )


async def _replay(connection: AsyncConnection, new: NewJob, key: str) -> Submitted | None:
    # Only reached on a conflict. Payloads are compared as jsonb, so key order and
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
        # Not this key's conflict (the unique key's), or the job holding it was deleted
        # (retention) in between: the key is free.
        return None
    if not row["same_request"]:
        raise IdempotencyConflict(key)
    return Submitted(job_from_row(row), replayed=True)
