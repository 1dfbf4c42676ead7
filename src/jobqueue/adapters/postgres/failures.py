"""Driver failures into domain errors, so nothing from asyncpg or SQLAlchemy leaks out.

Every failure of the database, or of the way to it, is one of two kinds:

- **transient** → `StoreUnavailable`: the store could not be reached, or it answered
  "try again" (a lost or refused connection, a timeout, a serialization failure or a
  deadlock, a server shutting down, starting up, out of connections or read-only after a
  failover). The same request may well succeed in a moment: HTTP answers 503 with
  `Retry-After`, the worker writes the outcome again later.
- **not transient** → `StoreError`: the store refused the statement (SQL it does not
  accept, an object that does not exist, a constraint or data violation, an internal
  error) or the driver refused how it was used. Retrying runs into the same refusal: a
  bug in jobqueue or a schema it does not expect, logged as such (HTTP 500).

The SQLSTATE decides where the driver gives one (asyncpg exceptions carry `.sqlstate`;
SQLAlchemy wraps them in a `DBAPIError` whose `.orig` copies it and whose cause is
asyncpg's), the exception's type where it does not. `is_transient` is the rule itself,
for code that holds a driver error or a domain error and must decide whether to retry.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import asyncpg
from sqlalchemy.exc import (
    DBAPIError,
    DisconnectionError,
    EmulatedDBAPIException,
    SQLAlchemyError,
    StatementError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeout

from jobqueue.domain.errors import InvalidJob, JobQueueError, StoreError, StoreUnavailable

# What the driver stack raises. OSError covers refused, reset and unreachable connections
# (asyncpg raises them before SQLAlchemy has a connection to wrap them with) and, being
# TimeoutError's base, asyncpg's client-side command and connect timeouts.
_DRIVER_ERRORS = (
    SQLAlchemyError,
    # The asyncpg adapter's DBAPI errors, raised bare (not wrapped in a `DBAPIError`) when
    # a connection is taken from the pool without SQLAlchemy's `Connection` and opening
    # it fails (`driver.pooled_driver`); asyncpg's own error is their cause.
    EmulatedDBAPIException,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
    OSError,
)

# SQLSTATE classes (the first two characters) in which every condition is transient.
_TRANSIENT_CLASSES = {
    "08",  # connection exception: the connection failed, was lost or never opened
    "53",  # insufficient resources: too many connections, out of memory, disk full
    "57",  # operator intervention: query_canceled (statement_timeout, a cancel),
    #        admin_shutdown and crash_shutdown (pg_terminate_backend, a restart),
    #        cannot_connect_now (starting up), idle_session_timeout
    "28",  # invalid authorization: the server refused the connection (credentials)
}
# Single transient conditions in classes that are otherwise bugs.
_TRANSIENT_CODES = {
    "40001",  # serialization_failure
    "40P01",  # deadlock_detected
    "55P03",  # lock_not_available (lock_timeout, NOWAIT)
    "25006",  # read_only_sql_transaction: connected to a standby, as after a failover
    "25P03",  # idle_in_transaction_session_timeout: the server ended the session
    "25P04",  # transaction_timeout: the server ended the session
    "3D000",  # invalid_catalog_name: the configured database does not exist (yet)
}

# SQLSTATE classes 22 (data exception) and 23 (integrity constraint violation). The
# asyncpg adapter reports most of them as a plain DBAPIError, so the code decides.
_REFUSED_VALUE_CLASSES = ("22", "23")


@contextmanager
def store_failures() -> Iterator[None]:
    """Raise `StoreUnavailable` for a transient failure of the database or of the way to
    it, `StoreError` for any other failure of the driver stack (see the module's doc).

    Domain errors raised inside (by a nested `store_failures` or `refused_values`) and
    exceptions that are not the driver's pass through unchanged.
    """
    try:
        yield
    except _DRIVER_ERRORS as exc:
        _hide_parameters(exc)
        raise classified(exc) from exc


@contextmanager
def refused_values() -> Iterator[None]:
    """Raise `InvalidJob` when PostgreSQL refuses a value the domain let through.

    A NUL character in a string or `\\u0000` in a payload is valid JSON and valid Python,
    but PostgreSQL cannot store it: that is the submitter's mistake, not an outage.
    """
    try:
        yield
    except (DBAPIError, asyncpg.PostgresError) as exc:
        # SQLAlchemy's wrapper, or asyncpg's own error from a statement sent on the driver.
        if not sqlstate(exc).startswith(_REFUSED_VALUE_CLASSES):
            raise
        raise InvalidJob(f"the job store refused the job: {reason(exc)}") from exc


def classified(exc: BaseException) -> StoreUnavailable | StoreError:
    """The domain error for the driver failure `exc`, to be raised `from exc`.

    The message has the SQLSTATE and the driver's first message line, never the statement
    or its parameters (they may hold a client's payload).
    """
    code = sqlstate(exc)
    what = f"{code} {reason(exc)}" if code else reason(exc)
    if is_transient(exc):
        return StoreUnavailable(f"the job store failed: {what}")
    return StoreError(f"the job store refused the statement: {what}", sqlstate=code)


def is_transient(error: BaseException) -> bool:
    """Whether trying the same thing again may succeed.

    True for `StoreUnavailable` and for the driver failures `store_failures` turns into
    it; False for `StoreError`, for any other domain error and for anything that is not a
    failure of the database or of the way to it.
    """
    if isinstance(error, StoreUnavailable):
        return True
    if isinstance(error, JobQueueError):
        return False
    code = sqlstate(error)
    if code[:2] in _TRANSIENT_CLASSES or code in _TRANSIENT_CODES:
        return True
    return any(_transient_type(each) for each in _chain(error))


def _transient_type(error: BaseException) -> bool:
    if isinstance(error, DBAPIError) and error.connection_invalidated:
        # SQLAlchemy found the connection closed: whatever the statement, it never ran to
        # the end on a live connection; the pool replaces the connection.
        return True
    if isinstance(error, DisconnectionError | PoolTimeout | OSError):
        return True
    if isinstance(error, asyncpg.InterfaceError):
        # asyncpg's own check on a connection it knows is closed (SQLAlchemy's dialect
        # recognises a disconnect by the same words); other interface errors are misuse.
        return "connection is closed" in str(error)
    # A prepared statement or type cache made stale by a schema change (a migration
    # while running): the adapter drops its caches, so the next try prepares afresh.
    if isinstance(
        error, asyncpg.InvalidCachedStatementError | asyncpg.exceptions.OutdatedSchemaCacheError
    ):
        return True
    # What a statement right after pg_terminate_backend meets when asyncpg has read the
    # server's goodbye but not yet the closed socket: the statement never started, and
    # the connection is replaced (the driver path invalidates it on any failure; through
    # SQLAlchemy its dialect calls it a disconnect), so the next try gets a good one.
    return isinstance(error, asyncpg.exceptions.InternalClientError) and "another operation" in str(
        error
    )


def _hide_parameters(error: BaseException) -> None:
    # The domain error is raised from the driver's, and a logged traceback prints the
    # whole chain: SQLAlchemy's text would show the statement's parameters (a client's
    # payload, a webhook URL with its token). The statement itself stays, to find the bug.
    for each in _chain(error):
        if isinstance(each, StatementError):
            each.hide_parameters = True


def _chain(error: BaseException) -> Iterator[BaseException]:
    """`error`, SQLAlchemy's wrapped driver exception and their explicit causes, each once."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        orig = current.orig if isinstance(current, DBAPIError) else None
        current = orig if isinstance(orig, BaseException) else current.__cause__


def sqlstate(exc: BaseException) -> str:
    """The SQLSTATE the driver reported for `exc` (SQLAlchemy's or asyncpg's), else ''."""
    for each in _chain(exc):
        code = getattr(each, "sqlstate", None)
        if isinstance(code, str) and code:
            return code
    return ""


def reason(exc: BaseException) -> str:
    """The driver's own message, without SQLAlchemy's wrapping (statement, parameters)."""
    source: BaseException = exc
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        # The asyncpg adapter wraps the driver's exception once more; the cause is asyncpg's.
        source = exc.orig.__cause__ or exc.orig
    elif isinstance(exc, EmulatedDBAPIException):
        source = exc.__cause__ or exc
    lines = str(source).strip().splitlines()
    name = type(source).__name__
    return f"{name}: {lines[0]}" if lines else name
