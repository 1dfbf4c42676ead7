"""A real `jobqueue api` process on a free loopback port, and jobs submitted to it over
keep-alive HTTP connections, as a client of the service would: one job per POST /jobs, or
many per POST /jobs/batch."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from uuid import UUID

from jobqueue.bench import processes
from jobqueue.bench.errors import BenchError
from jobqueue.bench.processes import Spawned
from jobqueue.bench.progress import progress
from jobqueue.bench.results import Stopwatch, Throughput
from jobqueue.bench.worker_handlers import NOOP_TYPE
from jobqueue.domain.fields import JsonValue

_READY_TIMEOUT = 120.0
_LOOK_EVERY = 0.05
_REQUEST_TIMEOUT = 30.0
_CREATED = 201
_OK = 200


class Connection:
    """One keep-alive HTTP/1.1 connection to the API, one request at a time.

    Not httpx: from one client on this machine it made ~65 requests/s where this made
    ~140 against the same API, and 8 of them ~200 against ~420 (measured), so it would
    have measured the client rather than the API. The API answers every request with a
    Content-Length, which is all this reads.
    """

    def __init__(self, host: str, port: int) -> None:
        self._host = host
        self._port = port
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def __aenter__(self) -> Connection:
        self._streams = await asyncio.open_connection(self._host, self._port)
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._streams is not None:
            writer = self._streams[1]
            writer.close()
            await writer.wait_closed()
            self._streams = None

    async def request(
        self, method: str, path: str, body: bytes = b"", headers: Mapping[str, str] | None = None
    ) -> tuple[int, bytes]:
        """The status and body of the answer to one request, with `headers` besides the
        usual ones."""
        assert self._streams is not None, "use the connection as an async context manager"
        reader, writer = self._streams
        extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self._host}:{self._port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
        )
        writer.write(head.encode("ascii") + body)  # one write: one segment for small requests
        async with asyncio.timeout(_REQUEST_TIMEOUT):
            await writer.drain()
            status_line, *header_lines = (
                (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            )
            headers = dict(
                (name.strip().lower(), value.strip())
                for name, _, value in (line.partition(":") for line in header_lines if line)
            )
            if "content-length" not in headers:
                raise BenchError(f"{method} {path}: an answer without Content-Length: {headers}")
            answer = await reader.readexactly(int(headers["content-length"]))
        return int(status_line.split()[1]), answer


@dataclass(frozen=True, slots=True)
class Api:
    process: Spawned
    host: str
    port: int

    def connect(self) -> Connection:
        return Connection(self.host, self.port)


@asynccontextmanager
async def running_api(url: str, folder: Path, label: str, **settings: str) -> AsyncIterator[Api]:
    """`jobqueue api` on the database at `url` with `settings` on top of the bench's
    (`processes.environment`), ready (its /readyz answers 200) on entry, stopped with
    SIGTERM on exit."""
    host, port = "127.0.0.1", _free_port()
    spawned = await processes.spawn(
        "the API process",
        processes.command("api"),
        processes.environment(url, HTTP_ADDR=f"{host}:{port}", **settings),
        folder,
        "api.log",
    )
    api = Api(spawned, host, port)
    try:
        await _ready(api, label)
        yield api
    except BaseException:
        await processes.stop(spawned.process)
        raise
    await spawned.stop(label)


async def submit(connection: Connection, job_type: str, payload: JsonValue) -> UUID:
    """POST one job; anything but 201 Created stops the run, with the API's answer."""
    body = json.dumps({"type": job_type, "payload": payload}).encode()
    status, answer = await connection.request("POST", "/jobs", body)
    if status != _CREATED:
        raise BenchError(f"POST /jobs answered {status}: {answer[:500]!r}")
    return UUID(json.loads(answer)["id"])


async def submit_batch(connection: Connection, job_type: str, payloads: list[JsonValue]) -> None:
    """POST one batch of jobs; anything but 201 Created with one answer per job sent stops
    the run."""
    body = json.dumps({"jobs": [{"type": job_type, "payload": each} for each in payloads]})
    status, answer = await connection.request("POST", "/jobs/batch", body.encode())
    if status != _CREATED:
        raise BenchError(f"POST /jobs/batch answered {status}: {answer[:500]!r}")
    answered = len(json.loads(answer)["jobs"])
    if answered != len(payloads):
        raise BenchError(f"POST /jobs/batch of {len(payloads)} jobs answered {answered}")


async def submit_over_http(
    api: Api, total: int, clients: int, stored: Callable[[], Awaitable[int]], label: str
) -> Throughput:
    """`clients` concurrent clients, each on one keep-alive connection, POSTing one no-op
    job per request until `total` jobs exist; the API process's CPU time is measured, and
    the run checked to have stored every job (`stored` counts them)."""

    async def one(connection: Connection, size: int) -> None:
        await submit(connection, NOOP_TYPE, {})

    return await _timed_clients(api, total, 1, clients, one, stored, label)


async def submit_batches_over_http(
    api: Api,
    total: int,
    batch: int,
    clients: int,
    stored: Callable[[], Awaitable[int]],
    label: str,
) -> Throughput:
    """As `submit_over_http`, with `batch` no-op jobs per POST /jobs/batch."""

    async def many(connection: Connection, size: int) -> None:
        await submit_batch(connection, NOOP_TYPE, [{}] * size)

    return await _timed_clients(api, total, batch, clients, many, stored, label)


async def _timed_clients(
    api: Api,
    total: int,
    per_request: int,
    clients: int,
    send: Callable[[Connection, int], Awaitable[None]],
    stored: Callable[[], Awaitable[int]],
    label: str,
) -> Throughput:
    """`clients` connections taking turns at the next request of up to `per_request` jobs
    (`send` sends one) until `total` are sent, timed with the API process's CPU time."""
    async with AsyncExitStack() as stack:
        connections = [await stack.enter_async_context(api.connect()) for _ in range(clients)]
        # Untimed: opens the API's pool connections behind the clients' own, and prepares
        # the request's statements on them.
        await asyncio.gather(*(send(each, 1) for each in connections))
        before = await stored()
        # Shared: each client takes the next request's first job and sends from there.
        tickets = iter(range(0, total, per_request))
        async with progress(label, total) as shown:

            async def client(connection: Connection) -> None:
                for first in tickets:
                    size = min(per_request, total - first)
                    await send(connection, size)
                    shown.advance(size)

            cpu_before = api.process.cpu_seconds()
            stopwatch = Stopwatch()
            await asyncio.gather(*(client(each) for each in connections))
            cpu_after = api.process.cpu_seconds()
            spent = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
            result = stopwatch.throughput(total, spent)
    # An answer says the job was stored; the table says it stayed stored.
    added = await stored() - before
    if added != total:
        raise BenchError(f"{label}: {total:,} jobs sent and answered, {added:,} stored")
    return result


async def _ready(api: Api, label: str) -> None:
    deadline = time.monotonic() + _READY_TIMEOUT
    while True:
        api.process.check(f"{label}, before it was ready")
        try:
            async with api.connect() as connection:
                if (await connection.request("GET", "/readyz"))[0] == _OK:
                    return
        except (OSError, asyncio.IncompleteReadError):
            pass  # not listening yet
        if time.monotonic() > deadline:
            raise BenchError(
                f"{label}: the API process was not ready after {_READY_TIMEOUT:g}s:\n"
                f"{api.process.tail()}"
            )
        await asyncio.sleep(_LOOK_EVERY)


def _free_port() -> int:
    """A port free on the loopback interface now; the API binds it a moment later (another
    process taking it meanwhile makes the API fail to start, which the run reports)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
