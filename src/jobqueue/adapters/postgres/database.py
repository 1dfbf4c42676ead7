"""Connection URLs and engines: the one place driver details are decided."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any
from weakref import WeakKeyDictionary

import msgspec
from sqlalchemy import event, text
from sqlalchemy.engine import ExceptionContext, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from jobqueue.adapters.postgres.limits import Limits
from jobqueue.adapters.postgres.pooler import Pooler

_ACCEPTED_SCHEMES = {"postgres", "postgresql", "postgresql+asyncpg"}
# Arguments the SQLAlchemy asyncpg adapter consumes itself; asyncpg.connect refuses them.
_ADAPTER_ONLY_ARGUMENTS = (
    "async_creator_fn",
    "prepared_statement_cache_size",
    "prepared_statement_name_func",
)


def decode_json(text: str) -> Any:
    """A `json`/`jsonb` value read from the database into Python values.

    msgspec decodes a claimed job's payload in a fraction of the standard library's time,
    which the worker pays once per job. The text comes from PostgreSQL, which only stores
    valid JSON, but numbers outside a float's range (jsonb keeps them as `numeric`) are
    refused by msgspec and read by the standard library as before, so no value the
    database holds becomes unreadable.
    """
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return json.loads(text)


def normalize_url(url: str) -> str:
    """Accept `postgres://`, `postgresql://` and `postgresql+asyncpg://`; return the asyncpg form.

    Raises `ValueError` with a message fit for a person reading a startup error.
    """
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if scheme not in _ACCEPTED_SCHEMES:
        raise ValueError(
            "must be a PostgreSQL URL such as postgresql://user:password@host:5432/dbname "
            f"(got scheme {scheme!r})"
        )
    try:
        parsed = make_url("postgresql+asyncpg://" + url.split("://", 1)[1])
    except ArgumentError as exc:
        raise ValueError(f"is not a valid URL: {exc}") from None
    return parsed.render_as_string(hide_password=False)


# How long a connection keeps a prepared statement before preparing it again. After five
# runs PostgreSQL keeps a prepared statement's generic plan, costed for the table as it
# was then, until the table is next analyzed. A worker that starts on an empty `jobs`
# table keeps a claim planned as a sequential scan per range while the table grows to
# thousands of rows (until autovacuum's next ANALYZE, a minute or more away): at 200 jobs/s
# after a TRUNCATE, pickup p50 went from 3 to 11-16 ms. Prepared again every few seconds,
# a statement is planned for the table's current size, at the cost of one more parse and
# five planned runs per statement and connection each time (no drain slower, measured).
PLAN_LIFETIME_SECONDS = 2
# Settings of a session of its own (not behind a transaction pooler, which refuses them
# at connection start: set them on the role there, docs/deployment.md).
SESSION_SETTINGS = {
    # A prepared statement is planned once, for any values (a generic plan), not for each
    # run's. Left to choose, PostgreSQL planned every claim and ending write for its
    # values (pg_prepared_statements: no generic plan in 60 runs), as a generic plan
    # cannot see how many elements an array holds and costs more on paper: about half a
    # millisecond of planning on every pickup's path. Generic plans are what every
    # hot-path and dashboard statement is plan-tested under (tests/support/plans.py), and
    # with `PLAN_LIFETIME_SECONDS` each is made again for the table's current size
    # (bench/RESULTS.md, "Generic plans, no JIT").
    "plan_cache_mode": "force_generic_plan",
    # No JIT compilation: every statement here reads a bounded number of rows, but a
    # listing's bounded search is estimated at a million (its CTEs), past
    # `jit_above_cost`, and a server built with LLVM (Debian's, most hosted ones; not the
    # embedded one the tests run on) spent ~500 ms compiling it for 60 ms of execution.
    "jit": "off",
}


def redact(url: str) -> str:
    """The URL with its password hidden, for logs."""
    return make_url(url).render_as_string(hide_password=True)


# An autocommit view of each engine, made once per engine: setting the isolation level per
# connection costs more than a one-statement operation itself.
_AUTOCOMMIT: WeakKeyDictionary[AsyncEngine, AsyncEngine] = WeakKeyDictionary()


def autocommit(engine: AsyncEngine) -> AsyncEngine:
    """`engine` in autocommit (same pool): for operations that are one statement each, which
    an explicit transaction would only add a BEGIN and a COMMIT round trip to."""
    view = _AUTOCOMMIT.get(engine)
    if view is None:
        view = _AUTOCOMMIT[engine] = engine.execution_options(isolation_level="AUTOCOMMIT")
    return view


def create_engine(
    url: str,
    *,
    pool_size: int = 10,
    application_name: str = "jobqueue",
    limits: Limits | None = None,
    pooler: Pooler = Pooler.NONE,
) -> AsyncEngine:
    """An engine on `url`; with `limits`, every connection is bounded by them.

    Behind a transaction pooler (`pooler`), `limits.statement` is not sent: PgBouncer
    refuses a connection that sets `statement_timeout` at its start (and, told to ignore
    it, drops it silently), so the server's own setting for the role applies instead
    (`statement_timeout_of` reads it back)."""
    # application_name is one of the few startup settings PgBouncer carries over.
    server_settings = {"application_name": application_name}
    connect_args: dict[str, Any] = {"server_settings": server_settings}
    if not pooler.keeps_sessions:
        # Named statements live on one server connection, which the pooler hands to
        # another client after the transaction: asyncpg's cache (the driver statements)
        # and SQLAlchemy's (everything else) are off, so every statement is unnamed and
        # parsed and executed within one exchange that the pooler keeps on one server.
        connect_args |= {"statement_cache_size": 0, "prepared_statement_cache_size": 0}
    else:
        connect_args["max_cached_statement_lifetime"] = PLAN_LIFETIME_SECONDS
        server_settings |= SESSION_SETTINGS
    pool_timeout = 30.0  # SQLAlchemy's own default
    if limits is not None:
        if pooler.keeps_sessions:
            server_settings["statement_timeout"] = str(limits.statement_milliseconds)
        client = limits.client.total_seconds()
        # asyncpg: `timeout` bounds connecting, `command_timeout` every statement.
        connect_args |= {"timeout": client, "command_timeout": client}
        pool_timeout = client
    engine = create_async_engine(
        normalize_url(url),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_timeout=pool_timeout,
        connect_args=connect_args,
        json_deserializer=decode_json,
    )
    if limits is not None:
        event.listen(engine.sync_engine, "handle_error", _drop_timed_out_connection)
    return engine


async def statement_timeout_of(engine: AsyncEngine) -> timedelta | None:
    """The `statement_timeout` the server applies to `engine`'s statements; None when
    they are not limited."""
    async with autocommit(engine).connect() as connection:
        milliseconds = await connection.scalar(
            text("SELECT setting::bigint FROM pg_settings WHERE name = 'statement_timeout'")
        )
    return timedelta(milliseconds=milliseconds) if milliseconds else None


def _drop_timed_out_connection(context: ExceptionContext) -> None:
    """A statement that ran out of client time leaves its connection mid-statement, maybe
    on a socket that stopped answering: it is closed at once and discarded, never reused.
    Left to SQLAlchemy, the discard would first try a graceful close, and wait out a
    timeout of its own on that same dead socket."""
    if not isinstance(context.original_exception, TimeoutError):
        return
    context.is_disconnect = True
    if context.connection is None:
        return
    driver = context.connection.connection.driver_connection
    if driver is not None:
        driver.terminate()  # asyncpg: drops the socket, waits for nothing


def driver_arguments(url: str) -> dict[str, Any]:
    """The arguments the engine's own connections get for `url` (host, Unix socket
    directory, ssl, …), for a raw asyncpg connection that must reach the server exactly
    the way they do (the LISTEN connection lives outside the pool)."""
    parsed = make_url(normalize_url(url))
    _, arguments = parsed.get_dialect()().create_connect_args(parsed)
    for name in _ADAPTER_ONLY_ARGUMENTS:
        arguments.pop(name, None)
    return dict(arguments)
