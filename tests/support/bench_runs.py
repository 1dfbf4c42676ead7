"""Running `jobqueue bench --quick` on a server, as its tests do, and reading the server
back: a query's rows, and the tables it holds."""

from __future__ import annotations

import asyncio
import subprocess

import asyncpg

from tests.support.postgres import dsn
from tests.support.processes import JOBQUEUE, REPO_ROOT, environment

TIMEOUT_SECONDS = 100


def run_bench(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(JOBQUEUE), "bench", "--quick", *args],
        cwd=REPO_ROOT,
        env=environment(DATABASE_URL=database_url),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
        check=False,
    )


async def _fetch(url: str, query: str, *args: object) -> list[asyncpg.Record]:
    connection = await asyncpg.connect(dsn(url))
    try:
        return list(await connection.fetch(query, *args))
    finally:
        await connection.close()


def fetch(url: str, query: str, *args: object) -> list[asyncpg.Record]:
    return asyncio.run(_fetch(url, query, *args))


def tables(url: str) -> set[str]:
    rows = fetch(url, "SELECT schemaname || '.' || tablename FROM pg_tables")
    return {row[0] for row in rows}
