"""Where the benchmark's PostgreSQL comes from, and the scratch database it runs in.

The service's `DATABASE_URL` when set, else an embedded server, in a temporary directory
here (deleted afterwards), not the service's JOBQUEUE_DATA_DIR: a benchmark leaves no data
directory behind, and no other process shares its server. Either way the benchmark creates a
database of its own, `jobqueue_bench_<random>`, and drops it at the end: it deletes and
bulk-inserts rows freely, which must never happen to a user's jobs.
"""

from __future__ import annotations

import secrets
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from jobqueue.adapters.postgres.database import create_engine, normalize_url
from jobqueue.adapters.postgres.embedded import start_embedded
from jobqueue.bench.errors import BenchError


@dataclass(frozen=True, slots=True)
class Server:
    url: str  # asyncpg form, on a database the benchmark only connects to
    source: str


@contextmanager
def server_for(database_url: str | None) -> Iterator[Server]:
    """The server of `database_url` (DATABASE_URL, already checked by the settings), or
    else a temporary embedded one, stopped and deleted on exit."""
    if database_url:
        yield Server(normalize_url(database_url), "DATABASE_URL")
        return
    with tempfile.TemporaryDirectory(prefix="jobqueue-bench-") as directory:
        embedded = start_embedded(Path(directory) / "pgdata", on_exit="delete")
        try:
            yield Server(embedded.url, "embedded, temporary")
        finally:
            embedded.stop()


@dataclass(frozen=True, slots=True)
class Scratch:
    name: str
    url: str


@asynccontextmanager
async def scratch_database(server: Server) -> AsyncIterator[Scratch]:
    """A new, empty database on `server`, dropped on exit (also after a failure)."""
    name = f"jobqueue_bench_{secrets.token_hex(6)}"
    # CREATE/DROP DATABASE cannot run inside a transaction; no pool, nothing lingers.
    admin = create_async_engine(server.url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        await _create(admin, name, server.source)
        try:
            yield Scratch(name, make_url(server.url).set(database=name).render_as_string(False))
        finally:
            async with admin.connect() as connection:
                await connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        await admin.dispose()


@asynccontextmanager
async def engine_on(url: str, pool_size: int) -> AsyncIterator[AsyncEngine]:
    """The service's own engine settings, sized for one scenario, disposed on exit."""
    engine = create_engine(url, pool_size=pool_size, application_name="jobqueue-bench")
    try:
        yield engine
    finally:
        await engine.dispose()


async def _create(admin: AsyncEngine, name: str, source: str) -> None:
    try:
        connection = await admin.connect()
    except (DBAPIError, OSError) as exc:
        raise BenchError(
            f"cannot connect to the database server ({source}): {_reason(exc)}"
        ) from None
    try:
        # The name is generated here, never taken from input; identifiers cannot be bound
        # as parameters.
        await connection.execute(text(f'CREATE DATABASE "{name}"'))
    except DBAPIError as exc:
        raise BenchError(
            f"cannot create a scratch database on the server ({_reason(exc)}). The "
            "benchmark only runs in a database of its own and will not write into the one "
            "in DATABASE_URL: grant CREATEDB to its user, or unset DATABASE_URL to run on "
            "an embedded PostgreSQL"
        ) from None
    finally:
        await connection.close()


def _reason(exc: Exception) -> str:
    cause = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    message = str(cause).strip()
    return message.splitlines()[0] if message else type(cause).__name__
