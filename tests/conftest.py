"""Database fixtures for the integration and contract suites: a real PostgreSQL, a
migrated database per test module. Unit tests never request them, so they never
start a server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.database import create_engine
from tests.support.postgres import (
    Server,
    create_database,
    drop_database,
    ensure_template,
    resolve_server,
)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Server]:
    with resolve_server() as server:
        yield server


@pytest.fixture(scope="session")
def template_database(postgres_server: Server) -> str:
    return ensure_template(postgres_server.url)


@pytest.fixture(scope="module")
def database_url(
    postgres_server: Server, template_database: str, request: pytest.FixtureRequest
) -> Iterator[str]:
    """A migrated database of this module's own (and this xdist worker's own)."""
    url = create_database(postgres_server.url, template_database, request.node.nodeid)
    yield url
    drop_database(postgres_server.url, url)


@pytest.fixture
def empty_database_url(postgres_server: Server, request: pytest.FixtureRequest) -> Iterator[str]:
    """A database with no schema at all, for migration tests."""
    url = create_database(postgres_server.url, None, request.node.nodeid)
    yield url
    drop_database(postgres_server.url, url)


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    """An engine on this module's database, emptied before each test."""
    engine = create_engine(database_url, pool_size=5)
    async with engine.begin() as connection:
        await connection.execute(text("TRUNCATE jobs"))
    yield engine
    await engine.dispose()
