"""Waits for a job's end (issue 29): how long after a job ended its waiter had it.

Each sample submits one `bench.wait` job and waits for it at once, as a producer that
wants the result would. The `jobqueue worker` process running it sleeps a fixed time in
the handler, so that the wait is under way before the job can end, then returns
`{"token": n}`, which the wait's answer must carry. A sample is the moment the waiter had
the answer (`time.time()` right after the wait returned) less the job's `finished_at`: the
`now()` of the statement that ended it, on PostgreSQL's clock, which is this machine's.

Three runs: `Client.wait` over HTTP to a `jobqueue api` process, one waiter at a time
(the issue's figure); `AsyncClient.wait` with `concurrent_waiters` waiting at once; and
in-process `jobqueue.wait`, one at a time.

The figure is a notification's, which two checks make sure of:

- Each wait began before its job ended. A wait marks a live job `watched`, never an ended
  one, so a job left unwatched had ended before its wait asked, and was read at once:
  such a sample is not counted, and more than `_LATE_SHARE` of them stops the run (the
  handler's sleep is too short for this machine). (A wait that marked its job just
  before the end and read it just after is answered by that read, and counted.)
- No LISTEN connection was lost during a run. While its process listens, a wait reads its
  job again only when woken (by a notification naming it, or by its listener coming
  back); only while it does not listen does it read it every POLL_INTERVAL (the API's)
  or every second (in-process).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, Protocol
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncEngine

import jobqueue
from jobqueue.bench.errors import BenchError
from jobqueue.bench.jobs_table import (
    LISTENER_APPLICATION,
    WAITS_APPLICATION,
    ListenerBackend,
    listening_connections,
    reset,
    unwatched,
)
from jobqueue.bench.over_http import Api
from jobqueue.bench.progress import progress
from jobqueue.bench.results import Latency, Measurement
from jobqueue.bench.sizes import Sizes
from jobqueue.bench.worker_handlers import WAIT_TYPE
from jobqueue.bench.worker_processes import WorkerProcesses
from jobqueue.client import AsyncClient, Client
from jobqueue.domain.durations import format_duration
from jobqueue.domain.errors import NotEnded
from jobqueue.domain.job import NewJob
from jobqueue.domain.status import Status
from jobqueue.entrypoints.config.settings import Settings

# How long each job's handler sleeps with one waiter: far longer than a wait takes to be
# under way (a request, one UPDATE), far shorter than POLL_INTERVAL.
HANDLER_SLEEP = timedelta(milliseconds=50)
# With many waiters, whose submissions and waits queue behind each other's in the one API
# process, longer: measured here, 88 of 100 waits of 20 waiters began after their job
# ended at 50 ms, 5 to 9 of 300 waits of 50 waiters at 250 ms, none of 300 at 1 s.
CONCURRENT_HANDLER_SLEEP = timedelta(milliseconds=500)
# The POLL_INTERVAL of every process the bench starts: none is given one, so each has
# the service's default (`processes.environment` drops the caller's).
SERVICE_POLL_INTERVAL = Settings().poll_interval
# A wait longer than this is no figure but a failure.
_WAIT_TIMEOUT = 60.0
# The share of samples whose wait may begin after their job ended (not counted).
_LATE_SHARE = 0.1

# Submits the job whose payload holds this token, waits for it; the job's id, its
# finished_at and the time the wait returned, both as `time.time()`.
WaitOne = Callable[[int], Awaitable[tuple[UUID, float, float]]]


class _Ended(Protocol):
    """What a wait answers, over HTTP (`JobRecord`) or in-process (`Job`)."""

    @property
    def id(self) -> UUID: ...
    @property
    def status(self) -> Status: ...
    @property
    def result(self) -> Any: ...
    @property
    def finished_at(self) -> datetime | None: ...


async def wait_for_endings(
    engine: AsyncEngine, api: Api, fleet: WorkerProcesses, sizes: Sizes
) -> list[Measurement]:
    """The three runs, each on a table emptied first, their jobs run by `fleet` (one
    process, listening, as `api` is)."""
    settings = f"WORKERS={fleet.workers}, POLL_INTERVAL={format_duration(SERVICE_POLL_INTERVAL)}"
    over_http = f"api and worker process, {settings}"
    # The API's LISTEN connection, and the worker processes'.
    service = {LISTENER_APPLICATION: len(fleet.running) + 1}
    base_url = f"http://{api.host}:{api.port}"
    found = []

    await reset(engine)
    label = f"wait: Client.wait after POST /jobs, 1 waiter ({_ms(HANDLER_SLEEP)} jobs; {over_http})"
    with Client(base_url) as client:

        async def one_over_http(token: int) -> tuple[UUID, float, float]:
            return await asyncio.to_thread(_wait_over_http, client, token, label)

        latency, note = await _run(
            engine, fleet, one_over_http, sizes.wait_samples, 1, service, label
        )
    found.append(Measurement("wait.http.c1", label + note, latency))

    await reset(engine)
    waiters = sizes.concurrent_waiters
    label = (
        f"wait: AsyncClient.wait after POST /jobs, {waiters} waiters at once "
        f"({_ms(CONCURRENT_HANDLER_SLEEP)} jobs; {over_http})"
    )
    async with AsyncClient(base_url) as shared:

        async def one_of_many(token: int) -> tuple[UUID, float, float]:
            payload = _payload(token, CONCURRENT_HANDLER_SLEEP)
            submitted = await shared.submit(WAIT_TYPE, payload)
            try:
                record = await shared.wait(submitted.id, timeout=_WAIT_TIMEOUT)
            except NotEnded as error:
                raise BenchError(f"{label}: {error}") from None
            return _checked(label, token, record, time.time())

        latency, note = await _run(
            engine, fleet, one_of_many, sizes.wait_samples, waiters, service, label
        )
    found.append(Measurement(f"wait.http.c{waiters}", label + note, latency))

    await reset(engine)
    label = (
        f"wait: jobqueue.wait(engine) after enqueue(engine), 1 waiter "
        f"({_ms(HANDLER_SLEEP)} jobs; worker process, {settings})"
    )

    async def one_in_process(token: int) -> tuple[UUID, float, float]:
        payload = _payload(token, HANDLER_SLEEP)
        new = NewJob.build(type=WAIT_TYPE, payload=payload, registered=[WAIT_TYPE])
        job_id = (await jobqueue.enqueue(engine, new)).job.id
        try:
            job = await jobqueue.wait(engine, job_id, timeout=_WAIT_TIMEOUT)
        except NotEnded as error:
            raise BenchError(f"{label}: {error}") from None
        return _checked(label, token, job, time.time())

    # The wait's own LISTEN connection, opened by the first (untimed) wait.
    in_process = {WAITS_APPLICATION: 1}
    latency, note = await _run(
        engine, fleet, one_in_process, sizes.wait_samples, 1, in_process, label
    )
    found.append(Measurement("wait.in_process.c1", label + note, latency))
    return found


async def _run(
    engine: AsyncEngine,
    fleet: WorkerProcesses,
    one: WaitOne,
    samples: int,
    waiters: int,
    listening: Mapping[str, int],
    label: str,
) -> tuple[Latency, str]:
    """`samples` waits, `waiters` at a time, after an untimed one per waiter (it opens
    connections on every side and prepares statements), with at least `listening` LISTEN
    connections of each application open all along; their latency, and what the report
    line adds about them."""
    tokens = iter(range(-waiters, samples))
    await asyncio.gather(*(one(next(tokens)) for _ in range(waiters)))
    before = await _listening(engine, listening)
    for application, count in listening.items():
        if sum(each.application == application for each in before) < count:
            raise BenchError(
                f"{label}: fewer than {count} {application!r} connections listen, so waits "
                "would read their job every so often instead of hearing of its end (is "
                "NOTIFY=false or DATABASE_POOLER set in this shell?)"
            )
    got: list[tuple[UUID, float, float]] = []
    async with progress(label, samples) as shown:

        async def waiter() -> None:
            for token in tokens:
                got.append(await one(token))
                shown.advance()

        await asyncio.gather(*(waiter() for _ in range(waiters)))
    fleet.check(label)
    if not before <= await _listening(engine, listening):
        raise BenchError(
            f"{label}: a LISTEN connection was lost during the run, so some waits may have "
            "been answered by reading their job every POLL_INTERVAL, not by a notification"
        )
    late = await unwatched(engine, [job_id for job_id, _, _ in got])
    counted = [(finished, returned) for job_id, finished, returned in got if job_id not in late]
    if len(late) > _LATE_SHARE * samples or len(counted) < 2:
        raise BenchError(
            f"{label}: {len(late)} of {samples} waits began after their job had ended: the "
            "handler's sleep is too short on this machine"
        )
    note = f" ({len(late)} waits began after the end, not counted)" if late else ""
    # One clock: the answer is read after the ending's commit, itself after its now(), so
    # a sample is negative only if the system clock was stepped between the two readings
    # (NTP); such a wait took no measurable time, not less than none.
    return Latency.of([max(0.0, returned - finished) for finished, returned in counted]), note


async def _listening(engine: AsyncEngine, applications: Mapping[str, int]) -> set[ListenerBackend]:
    """The LISTEN connections a run's waits rely on (an earlier run's in-process waits
    may still hold one, closed when it has been idle a while)."""
    return {
        each for each in await listening_connections(engine) if each.application in applications
    }


def _wait_over_http(client: Client, token: int, label: str) -> tuple[UUID, float, float]:
    """One sample with the sync client, in a thread of its own: `time.time()` is read
    there, right after `wait` returned, not once the event loop comes back to it."""
    submitted = client.submit(WAIT_TYPE, _payload(token, HANDLER_SLEEP))
    try:
        record = client.wait(submitted.id, timeout=_WAIT_TIMEOUT)
    except NotEnded as error:
        raise BenchError(f"{label}: {error}") from None
    return _checked(label, token, record, time.time())


def _checked(label: str, token: int, answer: _Ended, returned: float) -> tuple[UUID, float, float]:
    """The sample, once the wait's answer is the completed job with its handler's result:
    an answer without it is an error of the wait, not a figure."""
    if answer.status != Status.COMPLETED or answer.finished_at is None:
        raise BenchError(f"{label}: job {answer.id} ended {answer.status} at {answer.finished_at}")
    if answer.result != {"token": token}:
        raise BenchError(
            f"{label}: the wait for job {answer.id} returned {answer.result!r} as its result, "
            f"not its handler's {{'token': {token}}}"
        )
    return answer.id, answer.finished_at.timestamp(), returned


def _payload(token: int, sleep: timedelta) -> dict[str, Any]:
    return {"sleep": sleep.total_seconds(), "token": token}


def _ms(value: timedelta) -> str:
    return f"{value.total_seconds() * 1000:g} ms"
