"""How long the database may take: plain values, importable without the driver."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

_MILLISECOND = timedelta(milliseconds=1)


@dataclass(frozen=True, slots=True)
class Limits:
    """How long the database may take, so that no fault stalls a caller for long.

    `statement` is the server's `statement_timeout` on every connection: PostgreSQL
    cancels a statement running longer (a lock wait, a plan gone wrong). `client` bounds,
    on our side, opening a connection, waiting for one from the pool and every statement's
    round trip: a connection that stops answering (a half-open TCP connection, a server
    that froze) fails after it instead of when the kernel's keepalive gives up, hours on.
    """

    statement: timedelta
    client: timedelta

    def __post_init__(self) -> None:
        if self.statement <= timedelta(0) or self.client <= timedelta(0):
            raise ValueError("database time limits must be positive")

    @property
    def statement_milliseconds(self) -> int:
        return self.statement // _MILLISECOND
