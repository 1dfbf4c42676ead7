"""A PostgreSQL 15 server of the fault tests' own, which they may stop, restart and cut.

The shared test server (tests/support/postgres.py) must never go down under other
tests' feet, so the tests that stop PostgreSQL or kill its backends run against one of
these, made from Debian's binaries in /usr/lib/postgresql/15/bin: TCP on 127.0.0.1 and
a free port, trust authentication, fsync off (commits stay synchronous). PostgreSQL
refuses to run as root, so when the tests run as root the server runs as the `postgres`
OS user (`runuser`), in a temporary directory handed to that user.

Fixtures (use them with `pytest_plugins = ["tests.support.pg_server"]` in a test
module, so that a session-scoped one really is one per session):

- `pg15`: one server for the whole session, for tests that only kill backends or need
  many connections; it must be left running.
- `own_pg15`: a server of the requesting module's own, for tests that stop it.
- `pg15_database`, `own_pg15_database`: a fresh migrated database on one of them.

A test module using them should import this module only under TYPE_CHECKING: imported
before pytest registers it, it would miss pytest's assertion rewriting.

Without the binaries, a test that uses them fails saying so (`make prerequisites`
installs Debian's postgresql-15): a skip would let the suite pass untested.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.support.processes import free_port, run

PG_BIN = Path("/usr/lib/postgresql/15/bin")
ADMIN_APPLICATION = "jobqueue-tests-admin"
# pg_ctl waits this long for the server to start or stop.
PG_CTL_WAIT_SECONDS = 60

# fsync and full-page writes only matter when the machine itself crashes; what the tests
# crash is the server, whose committed WAL is in the OS cache by then. Commits stay
# synchronous: an immediate stop must never lose a transaction the service saw commit.
_SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "max_connections": "200",
    "fsync": "off",
    "full_page_writes": "off",
    "shared_buffers": "32MB",
    "log_min_messages": "warning",
    "log_connections": "off",
}


def binaries_missing() -> str | None:
    """Why a server cannot be made here, or None."""
    for name in ("initdb", "pg_ctl", "postgres"):
        if not (PG_BIN / name).is_file():
            return (
                f"PostgreSQL 15 is not installed ({PG_BIN / name} is missing): "
                "make prerequisites installs Debian's postgresql-15"
            )
    return None


class PgServer:
    """One PostgreSQL 15 cluster in a temporary directory; `start()` it, then use `url`.

    `cleanup()` stops it (immediately) and deletes its data; `running()` wraps the whole."""

    def __init__(self, base: Path | None = None) -> None:
        self.base = Path(base or tempfile.mkdtemp(prefix="jobqueue-pg15-"))
        self.data = self.base / "data"
        self.logfile = self.base / "postgres.log"
        self.port = free_port()
        self._as_postgres: list[str] = []
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.base, owner.pw_uid, owner.pw_gid)
            self._as_postgres = ["runuser", "-u", "postgres", "--"]
        self.base.chmod(0o700)
        self._initialized = False
        self._started = False

    # --- the server ---------------------------------------------------------------------

    @property
    def url(self) -> str:
        return self.database_url("postgres")

    def database_url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    @property
    def is_running(self) -> bool:
        return self._started

    def start(self) -> None:
        if not self._initialized:
            self._initdb()
        self._pg_ctl("start", "-l", str(self.logfile))
        self._started = True

    def stop(self, mode: str = "fast") -> None:
        """`pg_ctl stop -m mode` (immediate: like a crash, no checkpoint, connections cut)."""
        if mode not in ("immediate", "fast", "smart"):
            raise ValueError(f"unknown shutdown mode {mode!r}")
        self._pg_ctl("stop", "-m", mode)
        self._started = False

    def restart(self) -> None:
        self.stop("fast")
        self.start()

    def cleanup(self) -> None:
        try:
            if self._started or (self.data / "postmaster.pid").exists():
                self.stop("immediate")
        finally:
            shutil.rmtree(self.base, ignore_errors=True)

    def log(self) -> str:
        try:
            return self.logfile.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def _initdb(self) -> None:
        self._run(
            [
                str(PG_BIN / "initdb"),
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
                "--no-instructions",
            ]
        )
        settings = {
            **_SETTINGS,
            "port": str(self.port),
            "unix_socket_directories": f"'{self.base}'",
        }
        with (self.data / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write("\n# jobqueue fault tests\n")
            conf.writelines(f"{name} = {value}\n" for name, value in settings.items())
        self._initialized = True

    def _pg_ctl(self, action: str, *options: str) -> None:
        self._run(
            [
                str(PG_BIN / "pg_ctl"),
                action,
                "-D",
                str(self.data),
                "-w",
                "-t",
                str(PG_CTL_WAIT_SECONDS),
                *options,
            ]
        )

    def _run(self, command: Sequence[str]) -> None:
        done = subprocess.run(
            [*self._as_postgres, *command],
            capture_output=True,
            text=True,
            timeout=PG_CTL_WAIT_SECONDS + 30,
            check=False,
            # Out of the test runner's process group: a Ctrl-C of pytest must not take
            # the server down before the fixtures' finalizers stop it.
            start_new_session=True,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"{' '.join(command[:2])} failed ({done.returncode}):\n{done.stdout}\n"
                f"{done.stderr}\n--- server log ---\n{self.log()[-4000:]}"
            )

    # --- an administrative connection ---------------------------------------------------

    def fetch(self, query: str, *args: Any, database: str = "postgres") -> list[asyncpg.Record]:
        """The rows of one statement, over a connection of its own (not `jobqueue`'s
        application name, so `terminate_backends` never cuts it)."""
        return asyncio.run(self._fetch(database, query, args))

    async def _fetch(self, database: str, query: str, args: tuple[Any, ...]) -> list[Any]:
        connection = await asyncpg.connect(
            self.database_url(database),
            timeout=10,
            command_timeout=30,
            server_settings={"application_name": ADMIN_APPLICATION},
        )
        try:
            return list(await connection.fetch(query, *args))
        finally:
            await connection.close()

    def terminate_backends(
        self, application_name: str = "jobqueue", database: str | None = None
    ) -> int:
        """`pg_terminate_backend` every connection of `application_name` (on `database`
        only, when given); how many were terminated."""
        rows = self.fetch(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) AS n FROM pg_stat_activity"
            " WHERE application_name = $1 AND pid <> pg_backend_pid()"
            " AND ($2::text IS NULL OR datname = $2)",
            application_name,
            database,
        )
        return int(rows[0]["n"])

    # --- databases ----------------------------------------------------------------------

    def create_database(self, name: str | None = None) -> str:
        """A new empty database; returns its name."""
        name = name or f"jq_faults_{uuid.uuid4().hex[:10]}"
        self.fetch(f'CREATE DATABASE "{name}"')
        return name

    def drop_database(self, name: str) -> None:
        self.fetch(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def migrated_database(self, name: str | None = None) -> str:
        """A new database migrated by `jobqueue migrate`; returns its URL."""
        url = self.database_url(self.create_database(name))
        done = run(["migrate"], timeout=120, DATABASE_URL=url)
        if done.returncode != 0:
            raise RuntimeError(f"jobqueue migrate failed ({done.returncode}):\n{done.stderr}")
        return url


def database_name(url: str) -> str:
    return url.rsplit("/", 1)[1].partition("?")[0]


@contextlib.contextmanager
def running_server() -> Iterator[PgServer]:
    """A started server, stopped and deleted on exit however the block ends."""
    server = PgServer()
    try:
        server.start()
        yield server
    finally:
        server.cleanup()


def _fail_without_binaries() -> None:
    missing = binaries_missing()
    if missing is not None:
        pytest.fail(missing, pytrace=False)


@pytest.fixture(scope="session")
def pg15() -> Iterator[PgServer]:
    """The session's shared PostgreSQL 15: never stopped by a test."""
    _fail_without_binaries()
    with running_server() as server:
        yield server


@pytest.fixture(scope="module")
def own_pg15() -> Iterator[PgServer]:
    """A PostgreSQL 15 of this module's own, which its tests may stop and start."""
    _fail_without_binaries()
    with running_server() as server:
        yield server


@dataclass(frozen=True)
class Database:
    """A migrated database of one test on a `PgServer`."""

    server: PgServer
    name: str

    @property
    def url(self) -> str:
        return self.server.database_url(self.name)

    def fetch(self, query: str, *args: Any) -> list[asyncpg.Record]:
        return self.server.fetch(query, *args, database=self.name)

    def status_counts(self) -> dict[str, int]:
        rows = self.fetch("SELECT status, count(*) AS n FROM jobs GROUP BY status")
        return {row["status"]: int(row["n"]) for row in rows}

    def jobs(self) -> dict[str, tuple[str, int]]:
        """Every job's (status, attempts), by id."""
        rows = self.fetch("SELECT id::text AS id, status, attempts FROM jobs")
        return {row["id"]: (row["status"], int(row["attempts"])) for row in rows}

    def terminate_backends(self, application_name: str = "jobqueue") -> int:
        return self.server.terminate_backends(application_name, database=self.name)


def migrated(server: PgServer) -> Database:
    return Database(server, database_name(server.migrated_database()))


@pytest.fixture
def pg15_database(pg15: PgServer) -> Iterator[Database]:
    """A fresh migrated database on the shared server, dropped afterwards."""
    database = migrated(pg15)
    yield database
    pg15.drop_database(database.name)


@pytest.fixture
def own_pg15_database(own_pg15: PgServer) -> Iterator[Database]:
    """A fresh migrated database on this module's own server, dropped afterwards (when
    the server still runs: a test may leave it stopped, and its data goes with it)."""
    database = migrated(own_pg15)
    yield database
    if own_pg15.is_running:
        own_pg15.drop_database(database.name)
