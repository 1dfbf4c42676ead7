"""What stands between the service and PostgreSQL: a plain value, importable without the
driver (the settings name it, and `--help` must not load SQLAlchemy)."""

from __future__ import annotations

from enum import StrEnum


class Pooler(StrEnum):
    """The connection pooler the service's connections go through, if any.

    `PGBOUNCER`: PgBouncer in transaction mode (or a pooler as strict). A server
    connection then belongs to a client for one transaction only, so nothing may outlive
    one: no named prepared statements (PgBouncer before 1.21 cannot route them; the
    drivers' statement caches are off, every statement goes unnamed), no settings sent at
    connection start but the few PgBouncer tracks (`statement_timeout` must come from the
    role or database instead), no LISTEN and no session advisory lock (so NOTIFY and
    AUTO_MIGRATE are off, and migrations run against PostgreSQL itself).
    """

    NONE = "none"
    PGBOUNCER = "pgbouncer"

    @property
    def keeps_sessions(self) -> bool:
        """Whether a connection's session state (prepared statements, settings, LISTEN,
        advisory locks) lasts from one transaction to the next."""
        return self is Pooler.NONE
