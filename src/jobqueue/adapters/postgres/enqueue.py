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
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any
from uuid import UUID
from weakref import WeakKeyDictionary

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.pool import Pool

from jobqueue.adapters.payloads import MsgspecPayloadDecoder
from jobqueue.adapters.postgres.copy import copy_jobs, json_text
from jobqueue.adapters.postgres.driver import fetch_pooled
from jobqueue.adapters.postgres.failures import refused_values, store_failures
from jobqueue.adapters.postgres.graphs import insert_graph
from jobqueue.adapters.postgres.ids import time_ordered_ids
from jobqueue.adapters.postgres.notify import Notifier, pg_notify
from jobqueue.adapters.postgres.queries.inserts import (
    FIND_REPLAY,
    FIND_UNIQUE_HOLDER,
    INSERT_JOB,
    INSERT_JOB_ANNOUNCED,
    INSERT_JOBS,
    INSERT_JOBS_ANNOUNCED,
    SUBMITTED,
)
from jobqueue.adapters.postgres.rows import job_from_row
from jobqueue.adapters.postgres.statement import Statement
from jobqueue.domain.dependencies import Step
from jobqueue.domain.errors import IdempotencyConflict, InvalidJob, StoreUnavailable
from jobqueue.domain.fields import DEFAULT_MAX_ATTEMPTS
from jobqueue.domain.job import Job, NewJob, resolve
from jobqueue.domain.ports import Submitted
from jobqueue.domain.registry import Registry
from jobqueue.domain.type_options import NO_OPTIONS

# A bulk insert is one statement; past this many jobs a call is split, so that one call
# cannot build a statement the server must hold in memory whole (ten thousand jobs is
# ~ten MB of JSON).
INSERT_CHUNK = 10_000

# Rounds of insert-then-look-up a submission may take: a conflicting job can leave the
# statuses its key counts in (or be deleted) between the two; a few settle any race.
_CONFLICT_ROUNDS = 3


def _stored(new: NewJob, row: Any) -> Job:
    # `row` is (id, created_at) by position (then `announced`, when the statement notified).
    return new.stored(row[0], row[1])


async def enqueue(
    connection: AsyncConnection | AsyncEngine,
    new: NewJob,
    *,
    announce: bool = True,
    registry: Registry | None = None,
    default_max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> Submitted:
    """`new`, checked by `registry` and resolved with `default_max_attempts`
    (`_ready`), inserted in `connection`'s transaction, or committed at once on
    `engine`'s pool with a coalesced wake-up (`_enqueue_committed`). The public
    `jobqueue.enqueue` (`entrypoints/producer.py`) says what a caller gets."""
    (new,) = _ready((new,), registry, default_max_attempts)
    if new.depends_on:
        (submitted,) = await enqueue_graph(connection, (Step(new),), announce=announce)
        return submitted
    if isinstance(connection, AsyncEngine):
        return await _enqueue_committed(connection, new, announce)
    statement = INSERT_JOB_ANNOUNCED if announce else INSERT_JOB
    with store_failures(), refused_values():
        for _ in range(_CONFLICT_ROUNDS):
            inserted = await connection.execute(statement.clause, insert_values(new))
            row = inserted.one_or_none()
            if row is not None:
                return Submitted(_stored(new, row), replayed=False)
            resolved = await _resolved(_on(connection), new)
            if resolved is not None:
                return resolved
        raise _unsettled(new)


async def enqueue_many(
    connection: AsyncConnection | AsyncEngine,
    news: Sequence[NewJob],
    *,
    announce: bool = True,
    registry: Registry | None = None,
    default_max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> list[Submitted]:
    """`news`, checked and resolved as by `enqueue`, in `connection`'s transaction (or in
    one of their own on `engine`): by COPY when no job has a key, else by one
    `INSERT ... ON CONFLICT` per `INSERT_CHUNK` jobs, since only an INSERT can meet a
    conflict. The public `jobqueue.enqueue_many` says what a caller gets."""
    for new in news:
        if not isinstance(new, NewJob):
            raise InvalidJob(f"enqueue_many takes NewJob values, got a {type(new).__name__}")
    news = _ready(news, registry, default_max_attempts)
    if any(new.depends_on for new in news):
        return await enqueue_graph(connection, [Step(new) for new in news], announce=announce)
    if isinstance(connection, AsyncEngine):
        with store_failures():
            async with connection.begin() as own:
                return await enqueue_many(own, news, announce=announce)
    if not news:
        return []
    if all(new.idempotency_key is None and new.unique_key is None for new in news):
        return await copy_jobs(connection, news, announce)
    submitted: list[Submitted] = []
    for start in range(0, len(news), INSERT_CHUNK):
        chunk = news[start : start + INSERT_CHUNK]
        submitted += await _insert_batch(connection, chunk, announce)
    return submitted


async def enqueue_graph(
    connection: AsyncConnection | AsyncEngine,
    steps: Sequence[Step],
    *,
    announce: bool = True,
    registry: Registry | None = None,
    default_max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> list[Submitted]:
    """`steps`, checked and resolved as by `enqueue`, a graph stored in `connection`'s
    transaction, or in one of their own on `engine` (`graphs.py`)."""
    news = _ready([step.new for step in steps], registry, default_max_attempts)
    steps = [replace(step, new=new) for step, new in zip(steps, news, strict=True)]
    if isinstance(connection, AsyncEngine):
        with store_failures():
            async with connection.begin() as own:
                return await insert_graph(own, steps, announce=announce)
    return await insert_graph(connection, steps, announce=announce)


def _ready(
    news: Sequence[NewJob], registry: Registry | None, default_max_attempts: int
) -> Sequence[NewJob]:
    """`news` checked by `registry` (when given) and resolved: the jobs to store."""
    if registry is None:
        return [resolve(new, NO_OPTIONS, default_max_attempts) for new in news]
    # The decoder HTTP submissions are checked with, made once per call: it holds nothing.
    decoder = MsgspecPayloadDecoder()
    for new in news:
        registry.check(new.type, new.payload, decoder)
    return [resolve(new, registry.options_for(new.type), default_max_attempts) for new in news]


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
    parameters = {"each_id": [ids[i] for i in order]}
    parameters |= {f"each_{name}": _each(name, placed) for name in SUBMITTED}
    statement = INSERT_JOBS_ANNOUNCED if announce else INSERT_JOBS
    with store_failures(), refused_values():
        result = await connection.execute(statement.clause, parameters)
        # Plain rows, by position (`_STORED_AT`'s order): a mapping per row costs more.
        decided: dict[UUID, Any] = {row[0]: row for row in result.all()}
        submitted: list[Submitted] = []
        for job_id, new in zip(ids, news, strict=True):
            row = decided.get(job_id)
            if row is not None:
                submitted.append(Submitted(_stored(new, row), replayed=False))
                continue
            resolved = await _resolved(_on(connection), new)
            if resolved is None:
                # The conflicting job left in between: this one goes in on its own.
                resolved = await enqueue(connection, new, announce=announce)
            submitted.append(resolved)
        return submitted


def _each(name: str, placed: Sequence[NewJob]) -> list[Any]:
    """The array of field `name` of `placed`, as `INSERT_JOBS` takes it."""
    values = [getattr(new, name) for new in placed]
    if name == "payload":
        return [json_text(value) for value in values]
    if name == "unique_states":
        return [None if value is None else ",".join(value) for value in values]
    return values


async def _enqueue_committed(engine: AsyncEngine, new: NewJob, announce: bool) -> Submitted:
    notifier = _notifier_of(engine) if announce else None
    # A quiet notifier lets the insert itself notify: the wake-up then leaves with the
    # commit, in the same round trip, and cannot be lost by a producer that drops its
    # engine (or its event loop) right after the call. At higher rates only one insert
    # per interval notifies, so commits seldom queue for the notification lock.
    carried = notifier is not None and notifier.carry()
    submitted = await submit_pooled(engine, new, announced=carried)
    if notifier is not None and not submitted.replayed:
        # A replay inserted nothing, so its statement notified nothing.
        if carried:
            notifier.carried()
        else:
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
    statement = INSERT_JOB_ANNOUNCED if announced else INSERT_JOB
    with store_failures():
        for _ in range(_CONFLICT_ROUNDS):
            with refused_values():
                rows = await fetch_pooled(engine, statement, insert_values(new))
            if rows:
                return Submitted(_stored(new, rows[0]), replayed=False)
            # Only on a key conflict: the read that explains it runs after the insert saw
            # the winner, and needs no transaction.
            resolved = await _resolved(_pooled(engine), new)
            if resolved is not None:
                return resolved
        raise _unsettled(new)


def insert_values(new: NewJob) -> dict[str, object]:
    """The insert's parameters for `new`: its fields (each the column of the same name),
    the payload as JSON text."""
    values: dict[str, object] = {name: getattr(new, name) for name in SUBMITTED}
    values["payload"] = json_text(new.payload)
    if new.unique_states is not None:
        values["unique_states"] = list(new.unique_states)
    return values


# A statement's rows, by column name: on a caller's connection, or on a pooled one.
Fetch = Callable[[Statement, Mapping[str, Any]], Awaitable[Sequence[Any]]]


def _on(connection: AsyncConnection) -> Fetch:
    async def fetch(statement: Statement, values: Mapping[str, Any]) -> Sequence[Any]:
        return (await connection.execute(statement.clause, values)).mappings().all()

    return fetch


def _pooled(engine: AsyncEngine) -> Fetch:
    async def fetch(statement: Statement, values: Mapping[str, Any]) -> Sequence[Any]:
        return await fetch_pooled(engine, statement, values)

    return fetch


async def _resolved(fetch: Fetch, new: NewJob) -> Submitted | None:
    """The answer to a submission that inserted nothing: the job its Idempotency-Key
    replays, or the job holding its unique key (a duplicate). None when neither exists
    any more (it was deleted, or left the statuses the key counts in): insert again."""
    if new.idempotency_key is not None:
        replayed = await _replay(fetch, new, new.idempotency_key)
        if replayed is not None:
            return replayed
    if new.unique_key is not None:
        values = {"unique_key": new.unique_key, "unique_period": new.unique_period}
        holders = await fetch(FIND_UNIQUE_HOLDER, values)
        if holders:
            return Submitted(job_from_row(holders[0]), replayed=False, duplicate=True)
    return None


def _unsettled(new: NewJob) -> StoreUnavailable:
    held = "Idempotency-Key" if new.idempotency_key is not None else "unique key"
    return StoreUnavailable(
        f"the job holding this submission's {held} kept changing during it; submit again"
    )


async def _replay(fetch: Fetch, new: NewJob, key: str) -> Submitted | None:
    # Only reached on a conflict.
    values = {
        "idempotency_key": key,
        "type": new.type,
        "payload": json_text(new.payload),
        "max_attempts": new.max_attempts,
    }
    rows = await fetch(FIND_REPLAY, values)
    if not rows:
        # Not this key's conflict (the unique key's), or the job holding it was deleted
        # (retention) in between: the key is free.
        return None
    if not rows[0]["same_request"]:
        raise IdempotencyConflict(key)
    return Submitted(job_from_row(rows[0]), replayed=True)
