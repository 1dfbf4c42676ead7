"""The worker's hot-path statements: declared in SQLAlchemy Core, sent by asyncpg itself.

A claim, an outcome batch and a lease renewal go out many times a second per process.
Executed through SQLAlchemy, each costs more client CPU in the execution layer
(connection facade, execution context, result objects, events) than in the driver and the
round trip together, which caps a worker's throughput at about half of what it is
otherwise. So these few statements are compiled once, for the asyncpg dialect, and run on
a driver connection taken straight from the engine's pool (`fetch_pooled`; `driver_of`
gives the one under a caller's SQLAlchemy connection): the Core statement stays their one
definition, the engine's pool, settings and timeouts stay in force, and only the
per-call layers are skipped.

SQLAlchemy's execution events do not see these statements; whoever watches them
(tracing, the tests that EXPLAIN every hot-path statement) registers with `watch` instead.

That is exact only while SQLAlchemy would pass the values through untouched:
`DriverStatement` refuses, at import, a statement with a bind processor (a type SQLAlchemy
converts before the driver sees it), and its columns' result processors are checked by
the store's tests against the same rows read through SQLAlchemy.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, asynccontextmanager
from typing import Any, Protocol
from weakref import WeakKeyDictionary

import asyncpg
from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.pool import Pool
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.util import greenlet_spawn

_DIALECT = asyncpg_dialect()  # type: ignore[no-untyped-call]


class DriverStatement:
    """A Core statement compiled once: its SQL with `$n` placeholders, and how to order
    named values into the driver's positional arguments."""

    def __init__(self, statement: ClauseElement) -> None:
        compiled = statement.compile(dialect=_DIALECT)
        assert isinstance(compiled, SQLCompiler)
        # Private, but the one place SQLAlchemy keeps them; empty for every type here.
        if compiled._bind_processors:
            raise TypeError(
                "a hot-path statement binds a type SQLAlchemy converts: "
                f"{sorted(compiled._bind_processors)}"
            )
        self.sql = str(compiled)
        self._names = tuple(compiled.positiontup or ())
        binds = compiled.binds
        self.required = frozenset(name for name in self._names if binds[name].required)
        # Constants the statement binds itself (`attempts + 1`, `locked_until = NULL`).
        self._constants = {
            name: binds[name].effective_value for name in self._names if name not in self.required
        }

    def arguments(self, values: Mapping[str, Any]) -> list[Any]:
        """The positional arguments for `values`, keyed by bind parameter name."""
        missing = self.required - values.keys()
        if missing:
            raise TypeError(f"no value for {sorted(missing)}")
        return [
            values[name] if name in self.required else self._constants[name] for name in self._names
        ]


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
    engine: AsyncEngine, statement: DriverStatement, values: Mapping[str, Any]
) -> Sequence[asyncpg.Record]:
    """`statement` sent on its own, in autocommit, on a connection of `engine`'s pool."""
    async with pooled_driver(engine) as driver:
        return await _sent(driver, engine.sync_engine.pool, statement, values)


async def _sent(
    driver: asyncpg.Connection, pool: Pool, statement: DriverStatement, values: Mapping[str, Any]
) -> Sequence[asyncpg.Record]:
    arguments = statement.arguments(values)
    watchers = _WATCHERS.get(pool)
    if not watchers:
        rows: list[asyncpg.Record] = await driver.fetch(statement.sql, *arguments)
        return rows
    with ExitStack() as watched:
        for watcher in watchers:
            watched.enter_context(watcher.sending(statement.sql, arguments))
        rows = await driver.fetch(statement.sql, *arguments)
        return rows
