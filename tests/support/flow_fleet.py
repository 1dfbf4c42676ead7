"""Worker processes running the flow handlers (tests/integration/flow_handlers.py) with
the settings of the flow-control tests, started in a fleet that stops them all, and what
those tests check of a queue's jobs: all of them drained, their starts paced."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncpg

from tests.integration.flow_handlers import MODULE
from tests.support.processes import Service, free_port, start

SETTINGS = {
    "WORKERS": "20",
    "QUEUES": "limited,paced,tenants,paced_keys",
    "POLL_INTERVAL": "200ms",
    "RECOVERY_INTERVAL": "500ms",
    # A killed process's slots come back about a lease after the kill.
    "LEASE_DURATION": "3s",
    "JOB_TIMEOUT": "2s",
    "STATEMENT_TIMEOUT": "1s",
    "DB_CLIENT_TIMEOUT": "1500ms",
    "LOG_LEVEL": "INFO",
    "AUTO_MIGRATE": "false",
}


def _worker(database_url: str, logs: Path, **settings: str) -> Service:
    port = free_port()
    service = start(
        ["worker", "--handlers", MODULE],
        port,
        logs,
        DATABASE_URL=database_url,
        METRICS_ADDR=f"127.0.0.1:{port}",
        **{**SETTINGS, **settings},
    )
    return service


@contextmanager
def _fleet() -> Iterator[list[Service]]:
    services: list[Service] = []
    try:
        yield services
    finally:
        for service in services:
            service.stop()


# What a paced drain may take beyond twice its pacing: two worker processes starting
# (imports, migrations checked, limits declared) on a busy machine. Three times the
# pacing alone was too little for 5 s of pacing with the suite beside it (15.2 s).
START_UP_SECONDS = 15.0


async def _drained(connection: asyncpg.Connection, queue: str, *, pacing: float) -> None:
    """Until every job of `queue` completed: at most twice `pacing` (how long its limits
    make the drain last) and the processes' start-up."""
    deadline = time.monotonic() + 2 * pacing + START_UP_SECONDS
    while await connection.fetchval(
        "SELECT count(*) FROM jobs WHERE queue = $1 AND status <> 'completed'", queue
    ):
        assert time.monotonic() < deadline, f"the jobs of {queue} did not drain"
        await asyncio.sleep(0.2)


def _assert_paced(starts: list[float], rate: int) -> None:
    """No window of one second holds more than `rate` of the sorted `starts` (the most
    any holds is in one that begins at a start), and they came at 90 % of it at least."""
    busiest = max(
        sum(1 for other in starts[index:] if other < start + 1.0)
        for index, start in enumerate(starts)
    )
    assert busiest <= rate
    came = (len(starts) - 1) / (starts[-1] - starts[0])
    assert came >= 0.9 * rate, f"{came:.1f} starts a second"
