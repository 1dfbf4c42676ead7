"""A real PgBouncer in transaction mode in front of a test PostgreSQL server.

Debian's `pgbouncer` binary, run as a process of the tests' own on a free loopback port
(`make test` installs the package: scripts/prerequisites.sh). PgBouncer
refuses to run as root, so as root it switches, with its `-u` option, to the user that
can reach the server: the owner of a Unix socket's directory (the embedded server's is
private to its user), else `postgres`. Clients are trusted; PgBouncer logs in to the
server as the client's user, with the URL's password if it has one.

Its admin console answers only the simple query protocol, which asyncpg never speaks:
`show` asks it through `psql` (PostgreSQL's client, which PgBouncer's package needs).

`JOBQUEUE_TEST_PGBOUNCER=1` routes the integration suite's `serve`/`api`/`worker`
processes, the `engine` fixture and `build_api` through one of these (`routed_url`,
`service_settings`), with `DATABASE_POOLER=pgbouncer`, `NOTIFY=false` and
`AUTO_MIGRATE=false`, except in tests marked `direct_database("why")`: what they test
needs a session of its own (LISTEN, a migration) or the server itself.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy.engine import URL, make_url

from jobqueue.adapters.postgres.database import normalize_url
from jobqueue.adapters.postgres.pooler import Pooler
from tests.support.processes import free_port

PACKAGE = "pgbouncer"
SWITCH = "JOBQUEUE_TEST_PGBOUNCER"
MARKER = "direct_database"
# Clients of every test of a session share one PgBouncer per server, each service with
# a pool of its own: room for all of them, and a server pool per database small enough
# that its connections really are shared between clients.
MAX_CLIENTS = 2000
POOL_SIZE = 10
START_SECONDS = 30


def binary() -> Path | None:
    found = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    return Path(found) if Path(found).is_file() else None


def missing() -> str | None:
    """Why no PgBouncer can be started here, or None."""
    if binary() is None:
        return f"PgBouncer is not installed: make prerequisites installs Debian's {PACKAGE}"
    if shutil.which("psql") is None:
        return "psql is not installed: make prerequisites installs Debian's postgresql-client"
    return None


class PgBouncer:
    """One PgBouncer in transaction mode in front of the server of `server_url`;
    `start()` it, `url(database_url)` for a database of that server, then `stop()`."""

    def __init__(self, server_url: str, *, pool_size: int = POOL_SIZE) -> None:
        self.server = make_url(normalize_url(server_url))
        self.port = free_port()
        self.pool_size = pool_size
        self.base = Path(tempfile.mkdtemp(prefix="jobqueue-pgbouncer-"))
        self.log = self.base / "pgbouncer.log"
        self._process: subprocess.Popen[bytes] | None = None

    # --- where clients go ---------------------------------------------------------------

    def url(self, database_url: str) -> str:
        """`database_url` (a database on this PgBouncer's server) through PgBouncer."""
        target = make_url(normalize_url(database_url))
        return URL.create(
            "postgresql+asyncpg",
            username=target.username,
            password=target.password,
            host="127.0.0.1",
            port=self.port,
            database=target.database,
        ).render_as_string(hide_password=False)

    def serves(self, database_url: str) -> bool:
        """Whether `database_url` is on this PgBouncer's server."""
        return _server_of(make_url(normalize_url(database_url))) == _server_of(self.server)

    # --- the process --------------------------------------------------------------------

    def start(self) -> None:
        program = binary()
        if program is None:
            raise RuntimeError(missing())
        config = self._write_config()
        command = [str(program), str(config)]
        if os.geteuid() == 0:
            user = self._os_user()
            owner = pwd.getpwnam(user)
            os.chown(self.base, owner.pw_uid, owner.pw_gid)
            command[1:1] = ["-u", user]
        with self.log.open("wb") as log:
            self._process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                # Its own session: a Ctrl-C of pytest must not stop it before the tests'
                # own finalizers have stopped the services using it.
                start_new_session=True,
            )
        self._wait_until_answering()

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            # SIGTERM, not SIGINT: 1.18 waits for every client to leave on SIGINT.
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        shutil.rmtree(self.base, ignore_errors=True)

    def output(self) -> str:
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    # --- the admin console --------------------------------------------------------------

    def show(self, what: str) -> list[dict[str, str]]:
        """The rows of `SHOW <what>` (STATS, POOLS, SERVERS, CLIENTS, …) on the console."""
        done = subprocess.run(
            [
                "psql",
                "-X",
                "-A",
                "-F",
                "\t",
                "-P",
                "footer=off",
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                self._admin,
                "-d",
                "pgbouncer",
                "-c",
                f"SHOW {what}",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            env={**os.environ, "PGCONNECT_TIMEOUT": "10"},
        )
        if done.returncode != 0:
            raise RuntimeError(f"SHOW {what} failed: {done.stderr.strip()}")
        header, *rows = done.stdout.splitlines()
        names = header.split("\t")
        return [dict(zip(names, row.split("\t"), strict=True)) for row in rows]

    def stats(self, database: str) -> dict[str, int]:
        """The counters of `SHOW STATS` for `database` (all 0 before its first client)."""
        for row in self.show("STATS"):
            if row["database"] == database:
                return {name: int(value) for name, value in row.items() if value.isdigit()}
        return {}

    # --- inside -------------------------------------------------------------------------

    @property
    def _admin(self) -> str:
        return self.server.username or "postgres"

    def _socket_directory(self) -> str | None:
        host = self.server.query.get("host") or self.server.host
        if isinstance(host, tuple):
            host = host[0]
        return host if host is not None and host.startswith("/") else None

    def _os_user(self) -> str:
        directory = self._socket_directory()
        if directory is not None:
            return pwd.getpwuid(os.stat(directory).st_uid).pw_name
        return "postgres"

    def _write_config(self) -> Path:
        directory = self._socket_directory()
        host = directory or self.server.host or "127.0.0.1"
        port = self.server.port or 5432
        # `*`: every database name a client asks for, on this one server.
        databases = f"* = host={host} port={port}"
        users = {self._admin: self.server.password or ""}
        (self.base / "users.txt").write_text(
            "".join(f'"{user}" "{password}"\n' for user, password in users.items()),
            encoding="utf-8",
        )
        config = self.base / "pgbouncer.ini"
        config.write_text(
            "\n".join(
                [
                    "[databases]",
                    databases,
                    "[pgbouncer]",
                    "pool_mode = transaction",
                    "listen_addr = 127.0.0.1",
                    f"listen_port = {self.port}",
                    "unix_socket_dir =",
                    "auth_type = trust",
                    f"auth_file = {self.base / 'users.txt'}",
                    f"admin_users = {self._admin}",
                    f"max_client_conn = {MAX_CLIENTS}",
                    f"default_pool_size = {self.pool_size}",
                    # A test database is dropped with its connections: PgBouncer's server
                    # connections to it must not hold the DROP up for long.
                    "server_idle_timeout = 5",
                    "server_login_retry = 1",
                    "log_connections = 0",
                    "log_disconnections = 0",
                    "",
                ]
            ),
            encoding="utf-8",
        )
        return config

    def _wait_until_answering(self) -> None:
        deadline = time.monotonic() + START_SECONDS
        while True:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"pgbouncer exited with {self._process.returncode}:\n{self.output()}"
                )
            try:
                self.show("VERSION")
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"pgbouncer did not answer within {START_SECONDS}s:\n{self.output()}"
                    ) from None
            time.sleep(0.1)


def _server_of(url: URL) -> tuple[object, ...]:
    host = url.query.get("host") or url.host
    return (host if not isinstance(host, tuple) else host[0], url.port or 5432)


@contextlib.contextmanager
def running(server_url: str, *, pool_size: int = POOL_SIZE) -> Iterator[PgBouncer]:
    """A started PgBouncer in front of `server_url`'s server, stopped on exit."""
    bouncer = PgBouncer(server_url, pool_size=pool_size)
    try:
        bouncer.start()
        yield bouncer
    finally:
        bouncer.stop()


# --- the switch: the suite's services through PgBouncer ----------------------------------


class _Routing:
    """Whether the running test goes through PgBouncer, and the PgBouncers doing it, one
    per server, started when first needed and stopped at the end of the session."""

    def __init__(self) -> None:
        self.enabled = os.environ.get(SWITCH, "").lower() in {"1", "true", "yes", "on"}
        self.current_test_direct = False
        self._bouncers: list[PgBouncer] = []
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        return self.enabled and not self.current_test_direct

    def bouncer_for(self, database_url: str) -> PgBouncer:
        with self._lock:
            for bouncer in self._bouncers:
                if bouncer.serves(database_url):
                    return bouncer
            bouncer = PgBouncer(database_url)
            bouncer.start()
            self._bouncers.append(bouncer)
            return bouncer

    def stop_all(self) -> dict[str, int]:
        """Stop them; what went through them, for the session's summary."""
        with self._lock:
            bouncers, self._bouncers = self._bouncers, []
        totals = {"pgbouncers": len(bouncers), "databases": 0, "transactions": 0, "queries": 0}
        for bouncer in bouncers:
            try:
                rows = [row for row in bouncer.show("STATS") if row["database"] != "pgbouncer"]
            except RuntimeError:
                rows = []
            finally:
                bouncer.stop()
            totals["databases"] += len(rows)
            totals["transactions"] += sum(int(row["total_xact_count"]) for row in rows)
            totals["queries"] += sum(int(row["total_query_count"]) for row in rows)
        return totals


def summary(totals: list[dict[str, int]]) -> str:
    """One line saying how much of the session went through PgBouncer."""
    added = {
        name: sum(each.get(name, 0) for each in totals)
        for name in ("pgbouncers", "databases", "transactions", "queries")
    }
    return (
        f"{SWITCH}: {added['transactions']:,} transactions ({added['queries']:,} statements) "
        f"of {added['databases']} databases went through {added['pgbouncers']} PgBouncer(s)"
    )


ROUTING = _Routing()
# The commands whose database traffic the switch routes; `migrate` always goes direct.
ROUTED_COMMANDS = frozenset({"serve", "api", "worker"})


def routed_url(database_url: str) -> tuple[str, Pooler]:
    """Where an engine of the tests connects for `database_url`, and through what."""
    if not ROUTING.active:
        return database_url, Pooler.NONE
    return ROUTING.bouncer_for(database_url).url(database_url), Pooler.PGBOUNCER


def service_settings(command: str | None, settings: dict[str, str]) -> dict[str, str]:
    """The settings a `jobqueue` subprocess gets: with the switch on, a service command's
    DATABASE_URL goes through PgBouncer, with the settings that needs. A test's own
    NOTIFY=true or AUTO_MIGRATE=true stays, and the service refuses it: such a test
    needs the `direct_database` mark, never a quiet change of what it tests."""
    url = settings.get("DATABASE_URL")
    chosen = "DATABASE_POOLER" in settings  # a test of the pooler itself
    if not ROUTING.active or command not in ROUTED_COMMANDS or not url or chosen:
        return settings
    through, _ = routed_url(url)
    defaults = {"NOTIFY": "false", "AUTO_MIGRATE": "false"}
    return {**defaults, **settings, "DATABASE_URL": through, "DATABASE_POOLER": "pgbouncer"}
