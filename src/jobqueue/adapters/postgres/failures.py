"""Driver failures into domain errors, so nothing from asyncpg or SQLAlchemy leaks out."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.exc import DBAPIError, DisconnectionError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from jobqueue.domain.errors import InvalidJob, StoreUnavailable

# OSError covers refused and timed-out connections, which asyncpg raises before SQLAlchemy
# has a connection to wrap them with.
_UNAVAILABLE = (DBAPIError, DisconnectionError, PoolTimeout, OSError)

# SQLSTATE classes 22 (data exception) and 23 (integrity constraint violation). The
# asyncpg adapter reports most of them as a plain DBAPIError, so the code decides.
_REFUSED_VALUE_CLASSES = ("22", "23")


@contextmanager
def store_failures() -> Iterator[None]:
    """Raise `StoreUnavailable` for any failure of the database or of the way to it."""
    try:
        yield
    except _UNAVAILABLE as exc:
        raise StoreUnavailable(f"the job store failed: {reason(exc)}") from exc


@contextmanager
def refused_values() -> Iterator[None]:
    """Raise `InvalidJob` when PostgreSQL refuses a value the domain let through.

    A NUL character in a string or `\\u0000` in a payload is valid JSON and valid Python,
    but PostgreSQL cannot store it: that is the submitter's mistake, not an outage.
    """
    try:
        yield
    except DBAPIError as exc:
        if not sqlstate(exc).startswith(_REFUSED_VALUE_CLASSES):
            raise
        raise InvalidJob(f"the job store refused the job: {reason(exc)}") from exc


def sqlstate(exc: DBAPIError) -> str:
    return str(getattr(exc.orig, "sqlstate", None) or "")


def reason(exc: BaseException) -> str:
    """The driver's own message, without SQLAlchemy's wrapping (statement, parameters)."""
    source: BaseException = exc
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        # The asyncpg adapter wraps the driver's exception once more; the cause is asyncpg's.
        source = exc.orig.__cause__ or exc.orig
    lines = str(source).strip().splitlines()
    name = type(source).__name__
    return f"{name}: {lines[0]}" if lines else name
