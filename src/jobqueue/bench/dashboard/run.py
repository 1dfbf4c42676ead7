"""One dashboard bench run: the server and its database, the table, the API process, the
dashboard's URLs from the app's route table, and their timings."""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from litestar import Litestar
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from jobqueue.adapters.postgres.database import create_engine, normalize_url
from jobqueue.adapters.postgres.embedded import start_embedded
from jobqueue.adapters.postgres.migrations import upgrade
from jobqueue.bench.dashboard import dataset as table
from jobqueue.bench.dashboard.dataset import Dataset
from jobqueue.bench.dashboard.pages import Unfillable, dashboard_routes, targets
from jobqueue.bench.dashboard.timing import Timed, time_targets
from jobqueue.bench.errors import BenchError
from jobqueue.bench.over_http import running_api
from jobqueue.bench.progress import progress


@dataclass(frozen=True, slots=True)
class Result:
    dataset: Dataset
    source: str  # where the server is
    reused: bool  # whether the table was filled by an earlier run
    table_size: str
    timed: list[Timed]
    requests: int


async def run(
    dataset: Dataset,
    *,
    database_url: str | None,
    data_dir: Path | None,
    database: str,
    refill: bool,
    requests: int,
    warmup: int,
) -> Result:
    async with _server(database_url, data_dir) as (server_url, source):
        url = await _database(server_url, database)
        async with progress("migrating"):
            await asyncio.to_thread(upgrade, url)
        engine = create_engine(url, pool_size=2, application_name="jobqueue-bench")
        try:
            reused = not refill and await table.holds(engine, dataset)
            if not reused:
                print(f"filling: {dataset.describe()}", flush=True, file=sys.stderr)
                await table.fill(engine, dataset)
            samples = await table.samples(engine, dataset)
            async with engine.connect() as connection:
                size = (
                    await connection.execute(
                        text("SELECT pg_size_pretty(pg_total_relation_size('jobs'))")
                    )
                ).scalar_one()
        finally:
            await engine.dispose()
        try:
            urls = targets(dashboard_routes(route_table()), samples)
        except Unfillable as error:
            raise BenchError(str(error)) from None
        with tempfile.TemporaryDirectory(prefix="jobqueue-bench-dashboard-") as folder:
            # INFO: the access log's line per request is the measurement.
            async with running_api(
                url, Path(folder), "dashboard", LOG_LEVEL="INFO", LOG_FORMAT="json"
            ) as api:
                timed = await time_targets(api, urls, requests=requests, warmup=warmup)
    return Result(dataset, source, reused, str(size), timed, requests)


def route_table() -> Litestar:
    """The app a `jobqueue api` process serves, built only to read its routes: nothing
    here connects anywhere."""
    from jobqueue.adapters.payloads import MsgspecPayloadDecoder
    from jobqueue.adapters.postgres.processes import PostgresProcesses
    from jobqueue.adapters.postgres.store import PostgresJobStore
    from jobqueue.adapters.telemetry.metrics import Metrics
    from jobqueue.domain.registry import Registry
    from jobqueue.entrypoints.config.settings import Settings
    from jobqueue.entrypoints.http.app import create_app
    from jobqueue.entrypoints.service.compose import http_config

    engine = create_engine("postgresql+asyncpg://routes@localhost/routes", pool_size=1)
    return create_app(
        http_config(Settings()),
        store=PostgresJobStore(engine),
        registry=Registry(),
        decoder=MsgspecPayloadDecoder(),
        metrics=Metrics(),
        processes=PostgresProcesses(engine),
    )


@asynccontextmanager
async def _server(
    database_url: str | None, data_dir: Path | None
) -> AsyncIterator[tuple[str, str]]:
    """The server's URL and a description of it: DATABASE_URL's, else an embedded one in
    `data_dir` (kept), else a temporary embedded one."""
    if database_url:
        yield normalize_url(database_url), "DATABASE_URL's server"
        return
    with tempfile.TemporaryDirectory(prefix="jobqueue-bench-dashboard-pg-") as scratch:
        kept = data_dir is not None
        directory = data_dir if data_dir is not None else Path(scratch) / "pgdata"
        embedded = await asyncio.to_thread(
            start_embedded, directory, on_exit="stop" if kept else "delete"
        )
        try:
            yield embedded.url, f"embedded, in {directory}" if kept else "embedded, temporary"
        finally:
            await asyncio.to_thread(embedded.stop)


async def _database(server_url: str, database: str) -> str:
    """`database` on the server, created if missing: its URL."""
    admin = create_async_engine(server_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        async with admin.connect() as connection:
            exists = (
                await connection.execute(
                    text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": database}
                )
            ).first()
            if exists is None:
                # An identifier cannot be bound; quoted, with its quotes doubled.
                quoted = database.replace('"', '""')
                await connection.exec_driver_sql(f'CREATE DATABASE "{quoted}"')
    except OSError as error:
        raise BenchError(f"cannot reach the database server: {error}") from None
    finally:
        await admin.dispose()
    return make_url(server_url).set(database=database).render_as_string(False)
