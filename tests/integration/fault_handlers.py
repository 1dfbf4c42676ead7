"""Handlers for the fault tests' worker processes, and the record they leave.

Loaded with `--handlers tests.integration.fault_handlers`. Every handler appends one
line when it starts and one when it ends to the file named by `FAULTS_EXECUTIONS`:

    <job_id> <attempt> <pid> start|end <unix time>

Each line is one `write` on a descriptor opened with O_APPEND, so the lines of
concurrent processes never interleave, and a process killed mid-attempt leaves its
`start` without an `end`. The tests read the file back with `read_executions`: the
`start` lines of a job are its executions.

- `work`: sleeps `ms` milliseconds (async), the chaos and load tests' job.
- `work_sync`: the same in a plain function (the pool's threads).
- `long`: sleeps `seconds` (async), for leases that must renew.
- `step`: a graph's job: sleeps `ms`, returns its `n` and the count and sum of the `n`s
  its dependencies returned (`await ctx.dependencies()`).

Below the handlers, the tests' side, never used by a worker (so what it needs is
imported where it is used, and a worker's start-up pays nothing for it): reading the
executions back, reading the processes' JSON logs (a SIGKILLed process may leave a
partial last line), enqueueing many `work` jobs, the processes a test started (killed,
process group and all, by the fixture that made them), and an HTTP client that keeps
submitting at a steady rate while probes watch `/healthz` and `/readyz`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import msgspec

from jobqueue import JobContext, NewJob, Registry

if TYPE_CHECKING:
    from tests.support.processes import Service

EXECUTIONS_VARIABLE = "FAULTS_EXECUTIONS"
MODULE = "tests.integration.fault_handlers"

registry = Registry()


class Work(msgspec.Struct, forbid_unknown_fields=True):
    ms: Annotated[int, msgspec.Meta(ge=0, le=60_000)]


class Long(msgspec.Struct, forbid_unknown_fields=True):
    seconds: Annotated[float, msgspec.Meta(ge=0)]


def _record(ctx: JobContext, event: str) -> None:
    path = os.environ.get(EXECUTIONS_VARIABLE)
    if not path:
        return
    line = f"{ctx.job_id} {ctx.attempt} {os.getpid()} {event} {time.time():.6f}\n"
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, line.encode())
    finally:
        os.close(descriptor)


@registry.handler("work", payload=Work)
async def work(ctx: JobContext, payload: Work) -> None:
    _record(ctx, "start")
    await asyncio.sleep(payload.ms / 1000)
    _record(ctx, "end")


@registry.handler("work_sync", payload=Work)
def work_sync(ctx: JobContext, payload: Work) -> None:
    _record(ctx, "start")
    time.sleep(payload.ms / 1000)
    _record(ctx, "end")


@registry.handler("stuck_sync", payload=Long)
def stuck_sync(ctx: JobContext, payload: Long) -> None:
    # A blocking call that ignores `ctx.stop`, as a stuck driver or socket would.
    _record(ctx, "start")
    time.sleep(payload.seconds)
    _record(ctx, "end")


class Layer(msgspec.Struct, forbid_unknown_fields=True):
    ms: Annotated[int, msgspec.Meta(ge=0, le=60_000)]
    n: int


@registry.handler("step", payload=Layer)
async def step(ctx: JobContext, payload: Layer) -> dict[str, int]:
    # A graph's job: its result is its number, and what it saw of its dependencies'.
    _record(ctx, "start")
    await asyncio.sleep(payload.ms / 1000)
    seen = [each.result for each in await ctx.dependencies() if each.completed]
    _record(ctx, "end")
    numbers = [n for each in seen if isinstance(each, dict) and isinstance(n := each["n"], int)]
    return {"n": payload.n, "seen": len(numbers), "sum": sum(numbers)}


@registry.handler("long", payload=Long)
async def long(ctx: JobContext, payload: Long) -> None:
    _record(ctx, "start")
    await asyncio.sleep(payload.seconds)
    _record(ctx, "end")


# --- the tests' side: what the handlers recorded ----------------------------------------


@dataclass(frozen=True, slots=True)
class Execution:
    job_id: str
    attempt: int
    pid: int
    event: str  # "start" or "end"
    at: float  # unix time


def read_executions(path: Path) -> list[Execution]:
    """Every complete line of the executions file, in the order written."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    records = []
    for line in text.splitlines(keepends=True):
        if not line.endswith("\n"):
            continue
        job_id, attempt, pid, event, at = line.split()
        records.append(Execution(job_id, int(attempt), int(pid), event, float(at)))
    return records


def starts_per_job(records: Iterable[Execution]) -> Counter[str]:
    """How many times each job's handler began: its executions."""
    return Counter(record.job_id for record in records if record.event == "start")


# --- the tests' side: logs -----------------------------------------------------------------


def log_records(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of a process's stdout; a partial last line (the process was killed
    while writing it) is left out, anything else that is not JSON is an error."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    lines = text.splitlines(keepends=True)
    records = []
    for number, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if number == len(lines) - 1 and not line.endswith("\n"):
                continue
            raise
    return records


def log_time(record: dict[str, Any]) -> float:
    """The unix time of a log record's `ts`."""
    stamp = datetime.strptime(record["ts"], "%Y-%m-%dT%H:%M:%S.%fZ")
    return stamp.replace(tzinfo=UTC).timestamp()


def completed_per_job(records: Iterable[dict[str, Any]]) -> Counter[str]:
    """How many `job finished` lines say `completed`, per job."""
    return Counter(
        record["job_id"]
        for record in records
        if record.get("message") == "job finished" and record.get("outcome") == "completed"
    )


# --- the tests' side: jobs -----------------------------------------------------------------


def work_jobs(count: int, rng: random.Random, low_ms: int = 5, high_ms: int = 50) -> list[NewJob]:
    return [
        NewJob.build(type="work", payload={"ms": rng.randint(low_ms, high_ms)})
        for _ in range(count)
    ]


def enqueue_all(
    database_url: str, new_jobs: Sequence[NewJob], per_transaction: int = 500
) -> list[str]:
    """Insert `new_jobs` with `jobqueue.enqueue`, one transaction per `per_transaction`
    jobs; their ids, as strings, in order."""
    return asyncio.run(_enqueue_all(database_url, new_jobs, per_transaction))


async def _enqueue_all(
    database_url: str, new_jobs: Sequence[NewJob], per_transaction: int
) -> list[str]:
    from jobqueue import enqueue
    from jobqueue.adapters.postgres.database import create_engine

    # Not the service's application name: terminate_backends must not cut it.
    engine = create_engine(database_url, pool_size=1, application_name="jobqueue-tests")
    ids: list[str] = []
    try:
        for first in range(0, len(new_jobs), per_transaction):
            async with engine.begin() as connection:
                for new in new_jobs[first : first + per_transaction]:
                    ids.append(str((await enqueue(connection, new)).job.id))
    finally:
        await engine.dispose()
    return ids


# --- the tests' side: processes ------------------------------------------------------------


class Fleet:
    """The `jobqueue` processes of one test, each in a session (process group) of its own
    with its output in its own directory under `logs`; `close()` (a fixture's finalizer)
    kills every group still running."""

    def __init__(self, logs: Path, executions: Path) -> None:
        self.logs = logs
        self.executions = executions
        self.services: list[Service] = []

    def start(self, command: str, name: str, **settings: str) -> Service:
        from tests.support.processes import JOBQUEUE, REPO_ROOT, Service, environment, free_port

        directory = self.logs / name
        directory.mkdir(parents=True, exist_ok=False)
        port = free_port()
        stdout, stderr = directory / "stdout.log", directory / "stderr.log"
        env = environment(
            command,
            HTTP_ADDR=f"127.0.0.1:{port}",
            **{EXECUTIONS_VARIABLE: str(self.executions)},
            **settings,
        )
        with stdout.open("wb") as out, stderr.open("wb") as err:
            process = subprocess.Popen(
                [str(JOBQUEUE), command, "--handlers", MODULE],
                cwd=REPO_ROOT,
                env=env,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        service = Service(process, f"http://127.0.0.1:{port}", stdout, stderr)
        self.services.append(service)
        return service

    def kill(self, service: Service) -> None:
        """SIGKILL the process group of `service` and reap it."""
        if service.process.poll() is None:
            # Only while the leader is unreaped: its id cannot belong to anyone else.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(service.process.pid, signal.SIGKILL)
        service.process.wait(timeout=30)

    def stop(self, service: Service, within: float = 60) -> int:
        """SIGTERM, as an orchestrator would; SIGKILL if it has not exited `within`."""
        if service.process.poll() is None:
            service.process.send_signal(signal.SIGTERM)
            try:
                service.process.wait(timeout=within)
            except subprocess.TimeoutExpired:
                self.kill(service)
        return service.process.returncode

    def close(self) -> None:
        for service in self.services:
            self.kill(service)

    def logs_of_all(self) -> list[dict[str, Any]]:
        return [record for service in self.services for record in log_records(service.stdout)]


def wait_for_log(service: Service, message: str, within: float) -> dict[str, Any]:
    """The first line of `service` whose message is `message`; polled until `within`."""
    deadline = time.monotonic() + within
    while True:
        for record in log_records(service.stdout):
            if record.get("message") == message:
                return record
        if service.process.poll() is not None:
            raise AssertionError(
                f"exited with {service.process.returncode} before logging {message!r}:\n"
                f"{service.errors()[-3000:]}\n{service.stdout.read_text()[-3000:]}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"did not log {message!r} within {within}s")
        time.sleep(0.05)


# --- the tests' side: HTTP load and probes -------------------------------------------------


@dataclass(frozen=True, slots=True)
class Answer:
    """One HTTP request: when it went out and came back (unix time), and how it ended."""

    started: float
    ended: float
    status: int | None  # None: no answer (`error` says why)
    retry_after: str | None = None
    error: str | None = None

    @property
    def seconds(self) -> float:
        return self.ended - self.started


@dataclass
class Load:
    """Submits `work` jobs over HTTP at about `rate` per second from `threads` threads.

    Every submission has an Idempotency-Key of its own and is retried, with the same key,
    until it is accepted (201, or 200 for a replay): after a 503's Retry-After, or one
    second after no answer. Once `stop()` is called no new submission starts; those in
    progress keep trying until `give_up_at`.
    """

    base_url: str
    rate: float
    threads: int = 1
    timeout: float = 5.0
    give_up_after: float = 30.0
    rng: random.Random = field(default_factory=lambda: random.Random(11))
    accepted: dict[str, str] = field(default_factory=dict)  # key -> job id
    answers: list[Answer] = field(default_factory=list)
    given_up: list[str] = field(default_factory=list)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _workers: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopped_at: float | None = None

    def start(self) -> Load:
        for index in range(self.threads):
            thread = threading.Thread(target=self._submit_forever, args=(index,), daemon=True)
            thread.start()
            self._workers.append(thread)
        return self

    def stop(self) -> None:
        self._stopped_at = time.monotonic()
        self._stopping.set()

    def join(self) -> None:
        for thread in self._workers:
            thread.join(timeout=self.give_up_after + self.timeout + 5)
        alive = [thread for thread in self._workers if thread.is_alive()]
        if alive:
            raise AssertionError(f"{len(alive)} submitting threads did not finish")

    def _submit_forever(self, index: int) -> None:
        import httpx

        period = self.threads / self.rate
        next_at = time.monotonic() + period * index / self.threads
        with httpx.Client(base_url=self.base_url, timeout=self.timeout) as client:
            while not self._stopping.is_set():
                delay = next_at - time.monotonic()
                if delay > 0 and self._stopping.wait(delay):
                    break
                self._submit(client)
                next_at = max(next_at + period, time.monotonic())

    def _submit(self, client: Any) -> None:
        import httpx

        key = uuid.uuid4().hex
        body = {"type": "work", "payload": {"ms": self.rng.randint(5, 50)}}
        while True:
            started = time.time()
            try:
                response = client.post("/jobs", json=body, headers={"Idempotency-Key": key})
            except httpx.HTTPError as error:
                self._answered(Answer(started, time.time(), None, error=repr(error)))
                wait = 1.0
            else:
                retry_after = response.headers.get("Retry-After")
                self._answered(Answer(started, time.time(), response.status_code, retry_after))
                if response.status_code in (200, 201):
                    with self._lock:
                        self.accepted[key] = response.json()["id"]
                    return
                if response.status_code != 503:
                    with self._lock:
                        self.given_up.append(key)
                    return
                wait = _seconds(retry_after)
            if (
                self._stopped_at is not None
                and time.monotonic() > self._stopped_at + self.give_up_after
            ):
                with self._lock:
                    self.given_up.append(key)
                return
            time.sleep(wait)  # what the server asked for, not a wait for a condition

    def _answered(self, answer: Answer) -> None:
        with self._lock:
            self.answers.append(answer)


def _seconds(retry_after: str | None) -> float:
    try:
        return max(0.0, min(float(retry_after or 1), 10.0))
    except ValueError:
        return 1.0


@dataclass
class Probe:
    """GETs `path` every `every` seconds (each with `timeout`) until stopped."""

    base_url: str
    path: str
    every: float = 0.2
    timeout: float = 2.0
    answers: list[Answer] = field(default_factory=list)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Probe:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout + 5)

    def _run(self) -> None:
        import httpx

        with httpx.Client(base_url=self.base_url, timeout=self.timeout) as client:
            while not self._stopping.is_set():
                started = time.time()
                try:
                    response = client.get(self.path)
                except httpx.HTTPError as error:
                    self.answers.append(Answer(started, time.time(), None, error=repr(error)))
                else:
                    self.answers.append(Answer(started, time.time(), response.status_code))
                self._stopping.wait(max(0.0, started + self.every - time.time()))
