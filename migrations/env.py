"""Alembic environment: async engine on asyncpg, serialised by an advisory lock.

The URL comes from the caller (`jobqueue migrate`, the tests) through
`config.attributes["url"]`, else from `DATABASE_URL`.
"""

from __future__ import annotations

import asyncio
import os
import time
from logging.config import fileConfig

from alembic import context
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from jobqueue.adapters.postgres.database import normalize_url
from jobqueue.adapters.postgres.schema import metadata

# Any constant works; it only has to be the same in every process that migrates.
MIGRATION_LOCK_KEY = 0x6A6F6271  # "jobq"
# How often a process waiting for another's migrations tries the lock again.
_LOCK_POLL_SECONDS = 0.1

config = context.config

# Only the `alembic` command has an ini file; a service migrating from code (no file)
# keeps the logging it configured itself.
if config.config_file_name is not None:
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def _url() -> str:
    url = config.attributes.get("url") or os.environ.get("DATABASE_URL")
    if not url:
        raise SystemExit(
            "DATABASE_URL is not set: point it at the database to migrate, "
            "e.g. DATABASE_URL=postgresql://user:password@localhost:5432/jobqueue"
        )
    return str(url)


def _lock(connection: Connection) -> None:
    """Take the session's migration lock, waiting outside any transaction.

    Tried in short transactions rather than waited for in one: a revision building an
    index CONCURRENTLY waits for every transaction holding a snapshot, so a process
    waiting for the lock inside one would deadlock with the process holding it. The lock
    is the session's and outlives the commits; Alembic then begins the migrations'
    transaction itself, which a revision's autocommit block can end and begin again.
    """
    while not connection.execute(
        text("SELECT pg_try_advisory_lock(:key)"), {"key": MIGRATION_LOCK_KEY}
    ).scalar():
        connection.commit()
        time.sleep(_LOCK_POLL_SECONDS)
    connection.commit()


def _run(connection: Connection) -> None:
    # Several processes may start together (`jobqueue serve` migrates on start). The
    # session lock makes them take turns, and each reads the version table only once it
    # holds the lock, so the later ones find nothing left to do.
    _lock(connection)
    try:
        context.configure(
            connection=connection,
            target_metadata=metadata,
            compare_type=True,
            transaction_per_migration=False,
        )
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()
    finally:
        connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATION_LOCK_KEY})
        connection.commit()


async def _run_online() -> None:
    engine = create_async_engine(normalize_url(_url()), poolclass=NullPool)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
    finally:
        await engine.dispose()


if context.is_offline_mode():
    context.configure(url=_url(), target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    asyncio.run(_run_online())
