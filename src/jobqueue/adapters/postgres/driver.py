"""Statements sent by asyncpg itself, on connections of a SQLAlchemy engine's pool.

Executed through SQLAlchemy, a statement costs more client CPU in its execution layer
(connection facade, execution context, result objects, events) than in the driver and the
round trip together, which caps a worker's throughput at about half of what it is
otherwise. So the store's statements (`statement.Statement`, numbered once) go to asyncpg
on a driver connection taken straight from the engine's pool (`fetch_pooled`; `driver_of`
gives the one under a caller's SQLAlchemy connection): the engine's pool, settings and
timeouts stay in force, and only the per-call layers are skipped.

SQLAlchemy's execution events do not see these statements; whoever watches them
(tracing, the tests that EXPLAIN every hot-path statement) registers with `watch` instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, asynccontextmanager
from typing import Any, Protocol
from weakref import WeakKeyDictionary

import asyncpg
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.pool import Pool
from sqlalchemy.util import greenlet_spawn

from jobqueue.adapters.postgres.statement import Statement


@asynccontextmanager
async def driver_of(connection: AsyncConnection) -> AsyncIterator[asyncpg.Connection]:
    """The asyncpg connection under `connection`, for the length of the block.

    A statement that fails or is cancelled on it leaves the connection in a state the
    pool cannot know (a query still running, a broken socket), so the connection is then
    invalidated: the pool closes it and opens a fresh one when next asked.
    """
    fairy = await connection.get_raw_connection()
    try:
        yield fairy.driver_connection
    except BaseException:
        synchronous = connection.sync_connection
        if synchronous is not None and not connection.closed and not connection.invalidated:
            # Synchronously, outside SQLAlchemy's greenlet: the driver connection is
            # terminated at once (no graceful close to wait for, nothing a second
            # cancellation could interrupt), so it can never go back to the pool busy.
            synchronous.invalidate()
        raise


class StatementWatcher(Protocol):
    def sending(self, sql: str, arguments: Sequence[Any]) -> AbstractContextManager[object]:
        """Entered around the statement's round trip; sees its failure, if any."""
        ...


# By pool: an engine made with `execution_options` is another object on the same pool.
_WATCHERS: WeakKeyDictionary[Pool, list[StatementWatcher]] = WeakKeyDictionary()


def watch(engine: AsyncEngine, watcher: StatementWatcher) -> Callable[[], None]:
    """Call `watcher` around every driver statement sent on `engine`'s connections;
    return the function that stops it."""
    watchers = _WATCHERS.setdefault(engine.sync_engine.pool, [])
    watchers.append(watcher)
    return lambda: watchers.remove(watcher)


@asynccontextmanager
async def pooled_driver(engine: AsyncEngine) -> AsyncIterator[asyncpg.Connection]:
    """An asyncpg connection of `engine`'s pool for statements in autocommit (asyncpg sends
    each on its own outside a transaction), taken and given back without SQLAlchemy's
    `Connection`: its start and end (events, execution options, the isolation level set
    and reset) cost more client CPU than the one-statement operation itself (single
    enqueue, 8 callers: 157-228 against 111-124 us per job, measured). The pool is the
    same, with its size, timeouts and connect arguments; a failure invalidates the
    connection as `driver_of` does. Opening a connection can fail with the adapter's own
    DBAPI error, unwrapped: `failures.store_failures` classifies it.
    """
    fairy = await greenlet_spawn(engine.sync_engine.raw_connection)
    try:
        yield fairy.driver_connection
    except BaseException:
        # Terminated at once, synchronously, as in `driver_of`.
        fairy.invalidate()
        raise
    finally:
        # No transaction was begun through the adapter, so giving the connection back
        # (its reset is the adapter's rollback) sends nothing and needs no greenlet.
        fairy.close()


async def fetch_pooled(
    engine: AsyncEngine, statement: Statement, values: Mapping[str, Any]
) -> Sequence[asyncpg.Record]:
    """`statement` sent on its own, in autocommit, on a connection of `engine`'s pool."""
    async with pooled_driver(engine) as driver:
        return await _sent(driver, engine.sync_engine.pool, statement, values)


async def _sent(
    driver: asyncpg.Connection, pool: Pool, statement: Statement, values: Mapping[str, Any]
) -> Sequence[asyncpg.Record]:
    arguments = statement.arguments(values)
    watchers = _WATCHERS.get(pool)
    if not watchers:
        rows: list[asyncpg.Record] = await driver.fetch(statement.numbered, *arguments)
        return rows
    with ExitStack() as watched:
        for watcher in watchers:
            watched.enter_context(watcher.sending(statement.numbered, arguments))
        rows = await driver.fetch(statement.numbered, *arguments)
        return rows
