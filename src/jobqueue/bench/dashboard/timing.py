"""Requesting each dashboard URL many times from a real `jobqueue api` process, and the
server time each request took, read from the process's access log.

Server time is the access log's `duration_ms` (`http/middleware.py`): from the request
reaching the application to its response handed to the server, rendering included, and
the client's side of the loopback excluded. Each request carries its own `X-Request-ID`,
which the log line repeats, so every duration is matched to its request and URL. The
round trip seen by the bench's keep-alive client is kept beside it, as an upper bound.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from jobqueue.bench.dashboard.pages import Target
from jobqueue.bench.errors import BenchError
from jobqueue.bench.over_http import Api
from jobqueue.bench.progress import progress
from jobqueue.bench.results import Latency

_ACCESS_LOGGER = "jobqueue.access"
_LOG_TIMEOUT = 30.0
_LOOK_EVERY = 0.1


@dataclass(frozen=True, slots=True)
class Timed:
    """One URL's timed requests."""

    target: Target
    statuses: tuple[int, ...]
    server: Latency  # from the access log
    round_trip: Latency  # from the client

    @property
    def failed(self) -> bool:
        return any(not 200 <= status < 300 for status in self.statuses)


async def time_targets(
    api: Api, targets: Sequence[Target], *, requests: int, warmup: int
) -> list[Timed]:
    """Each target `warmup` times untimed (plans, caches, the pool's connections), then
    `requests` times, one after the other on one keep-alive connection."""
    sent: list[tuple[Target, str, int, float]] = []
    async with api.connect() as connection, progress("requests", len(targets) * requests) as shown:
        for number, target in enumerate(targets):
            headers = _headers(target)
            for _ in range(warmup):
                await connection.request("GET", target.url, headers=headers)
            for attempt in range(requests):
                request_id = f"bench-{number}-{attempt}"
                started = time.perf_counter()
                status, _ = await connection.request(
                    "GET", target.url, headers={**headers, "X-Request-ID": request_id}
                )
                sent.append((target, request_id, status, time.perf_counter() - started))
                shown.advance()
    durations = await _logged_durations(api.process.log, {each[1] for each in sent})
    timed = []
    for target in targets:
        mine = [each for each in sent if each[0] is target]
        timed.append(
            Timed(
                target=target,
                statuses=tuple(status for _, _, status, _ in mine),
                server=Latency.of([durations[request_id] for _, request_id, _, _ in mine]),
                round_trip=Latency.of([seconds for _, _, _, seconds in mine]),
            )
        )
    return timed


def _headers(target: Target) -> dict[str, str]:
    # A fragment is asked for by htmx, which says so; a page may answer it differently.
    return {"HX-Request": "true"} if "/fragments/" in target.url else {}


async def _logged_durations(log: Path, request_ids: set[str]) -> dict[str, float]:
    """Seconds each request took by the access log, once every one of them is logged."""
    deadline = time.monotonic() + _LOG_TIMEOUT
    while True:
        found = {}
        logged = await asyncio.to_thread(log.read_text, encoding="utf-8", errors="replace")
        for line in logged.splitlines():
            if not line.startswith("{"):
                continue
            record = json.loads(line)
            if record.get("logger") == _ACCESS_LOGGER and record.get("request_id") in request_ids:
                found[record["request_id"]] = record["duration_ms"] / 1000
        if len(found) == len(request_ids):
            return found
        if time.monotonic() > deadline:
            raise BenchError(
                f"the API's access log holds {len(found)} of the {len(request_ids)} requests "
                f"sent after {_LOG_TIMEOUT:g}s ({log})"
            )
        await asyncio.sleep(_LOOK_EVERY)
