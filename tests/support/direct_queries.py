"""Queries the PgBouncer tests send straight to PostgreSQL, around the pooler, on a
connection of their own named CHECKER, and the name of a URL's database."""

from __future__ import annotations

from typing import Any

import asyncpg
from sqlalchemy.engine import make_url

from tests.support.postgres import dsn

# The checks' own direct connections, told apart from the services' in pg_stat_activity.
CHECKER = "jobqueue-tests-check"


async def direct(database_url: str, query: str, *args: Any) -> list[asyncpg.Record]:
    connection = await asyncpg.connect(
        dsn(database_url), server_settings={"application_name": CHECKER}
    )
    try:
        return list(await connection.fetch(query, *args))
    finally:
        await connection.close()


def database_name(database_url: str) -> str:
    name = make_url(database_url).database
    assert name is not None
    return name
