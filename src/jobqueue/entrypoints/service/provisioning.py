"""Where the service's database comes from, and bringing its schema up to date.

DATABASE_URL when set, else an embedded server in JOBQUEUE_DATA_DIR, stopped on exit
(docs/design.md, "Databases"). Alembic is imported only by `migrate`: a process started
with AUTO_MIGRATE=false never loads it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.database import redact, statement_timeout_of
from jobqueue.adapters.postgres.embedded import start_embedded
from jobqueue.adapters.postgres.schema_version import is_current
from jobqueue.domain.errors import JobQueueError
from jobqueue.entrypoints.config.settings import Settings
from jobqueue.entrypoints.config.variables import show
from jobqueue.entrypoints.service import exit_codes
from jobqueue.entrypoints.service.runtime import Signals, StartupError, installed

_log = logging.getLogger("jobqueue")


@asynccontextmanager
async def database(settings: Settings) -> AsyncIterator[str]:
    """The database URL to use: DATABASE_URL, else an embedded server, stopped on exit."""
    if settings.database_url is not None:
        _log.info(
            "using the database from DATABASE_URL",
            extra={"database": redact_url(settings.database_url)},
        )
        yield settings.database_url
        return
    try:
        embedded = await asyncio.to_thread(start_embedded, settings.data_dir)
    except JobQueueError as error:
        raise StartupError(str(error)) from None
    _log.info(
        "using the embedded PostgreSQL (DATABASE_URL is not set)",
        extra={"database": redact_url(embedded.url), "data_dir": str(embedded.data_dir)},
    )
    try:
        yield embedded.url
    finally:
        # Shielded: this must run to the end even when a second signal cancelled the rest.
        departure = await asyncio.shield(asyncio.to_thread(embedded.stop))
        where = {"data_dir": str(embedded.data_dir)}
        if departure.stopped:
            _log.info("stopped the embedded PostgreSQL", extra=where)
        else:
            count = len(departure.others)
            _log.info(
                f"left the embedded PostgreSQL to {count} other "
                f"{'process' if count == 1 else 'processes'}",
                extra={**where, "other_pids": list(departure.others)},
            )


def redact_url(url: str) -> str:
    try:
        return redact(url)
    except Exception:
        return "<unparsable URL>"


async def migrate(url: str, *, unless_current: bool = False) -> None:
    """Apply every migration to the database at `url`. Raises `StartupError`.

    With `unless_current`, a database already at the newest revision is left alone
    without loading Alembic (the usual start of a worker or an API process)."""
    if unless_current and await is_current(url):
        _log.info("database schema is up to date")
        return
    from jobqueue.adapters.postgres.migrations import upgrade

    _log.info("applying database migrations")
    try:
        # Alembic runs its own event loop, so it gets a thread; an advisory lock in the
        # migration environment makes concurrent starters take turns.
        await asyncio.to_thread(upgrade, url)
    except Exception as error:
        raise StartupError(
            f"migrating the database failed: {type(error).__name__}: {error}"
        ) from error
    _log.info("database schema is up to date")


async def warn_unless_statements_bounded(engine: AsyncEngine, settings: Settings) -> None:
    """Behind a transaction pooler the service cannot set `statement_timeout` on its
    connections (`create_engine`): say so at start when the server's own setting for
    the role is not STATEMENT_TIMEOUT, rather than run with statements unbounded."""
    wanted = settings.statement_timeout
    try:
        applied = await statement_timeout_of(engine)
    except Exception as error:  # the database may be down at start: the service copes
        _log.warning(
            "could not read the server's statement_timeout through the pooler",
            extra={"error": f"{type(error).__name__}: {error}"},
        )
        return
    if applied == wanted:
        return
    _log.warning(
        "statement_timeout through the pooler is %s, not STATEMENT_TIMEOUT (%s): set it "
        "for the service's role, e.g. ALTER ROLE <role> SET statement_timeout = '%s'",
        show(applied) if applied is not None else "unlimited",
        show(wanted),
        f"{wanted // timedelta(milliseconds=1)}ms",
    )


async def run_migrate(settings: Settings) -> int:
    if not settings.database_pooler.keeps_sessions:
        raise StartupError(
            f"migrations cannot run through DATABASE_POOLER={settings.database_pooler}: "
            "they hold a session advisory lock, which a transaction pooler cannot keep; "
            "run `jobqueue migrate` with DATABASE_URL pointing at PostgreSQL itself and "
            "DATABASE_POOLER unset"
        )
    # Not graceful: a migration cannot be drained. Cancelling still leaves the embedded
    # server behind us stopped, and Alembic's transaction rolls back.
    async with installed(Signals(graceful=False)) as signals:
        try:
            async with database(settings) as url:
                await migrate(url)
        except asyncio.CancelledError:
            if signals.forced:
                return exit_codes.FORCED
            raise
    return exit_codes.OK
