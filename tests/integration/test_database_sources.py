"""The PostgreSQL resolution order the tests (and the service) rely on."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from jobqueue.adapters.postgres.schema_version import head_revisions
from tests.support.postgres import Server, container_server, docker_answers, dsn


async def _server_version(url: str) -> int:
    connection = await asyncpg.connect(dsn(url))
    try:
        return int(await connection.fetchval("SHOW server_version_num"))
    finally:
        await connection.close()


def test_session_server_answers(postgres_server: Server) -> None:
    assert postgres_server.source in {"TEST_DATABASE_URL", "testcontainers", "embedded"}
    assert asyncio.run(_server_version(postgres_server.url)) >= 150000


def test_template_database_is_migrated_to_head(
    postgres_server: Server, template_database: str
) -> None:
    async def head() -> str:
        connection = await asyncpg.connect(dsn(postgres_server.url, template_database))
        try:
            return str(await connection.fetchval("SELECT version_num FROM alembic_version"))
        finally:
            await connection.close()

    assert {asyncio.run(head())} == head_revisions()


@pytest.mark.docker
def test_testcontainers_postgres_is_used_when_docker_answers() -> None:
    reason = docker_answers()
    if reason is not None:
        # Only `make test-docker` selects this test: asked for, it must not pass untested.
        pytest.fail(f"no Docker engine answered ({reason}); this test needs one", pytrace=False)
    with container_server() as server:
        assert server.source == "testcontainers"
        assert asyncio.run(_server_version(server.url)) // 10000 == 16
