"""Half-open connection (issue 11): a `jobqueue worker` reaches PostgreSQL through a
loopback TCP proxy that stops forwarding for 6 seconds, keeping every socket open (what a
dead peer or a silent network looks like), then forwards again.

With DB_CLIENT_TIMEOUT=2s and STATEMENT_TIMEOUT=1s, a claim or outcome write caught in
it fails within the client timeout (logged within DB_CLIENT_TIMEOUT + 2s of the pause);
the pool does not hang (jobs submitted after the resume complete within a few seconds);
every job completes in the end, none run more often than its attempts say.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from jobqueue import NewJob
from tests.support.fault_fleet import Fleet, wait_for_log
from tests.support.fault_records import log_records, log_time, read_executions, starts_per_job
from tests.support.tcp_proxy import TcpProxy

if TYPE_CHECKING:
    from tests.support.pg_server import Database, PgServer

pytest_plugins = ["tests.support.pg_server"]
pytestmark = pytest.mark.slow

DB_CLIENT_TIMEOUT = 2.0
FAILURE_LOGGED_WITHIN = DB_CLIENT_TIMEOUT + 2.0
PAUSE = 6.0
FEED_EVERY = 0.05  # one job every 50ms, enqueued directly, not through the proxy
FEED_BEFORE = 3.0
FEED_AFTER = 5.0
NEW_JOBS_WITHIN = 5.0  # after the resume: "a few seconds"
DRAIN_DEADLINE = 30.0
WORKER_SETTINGS = {
    "NOTIFY": "false",  # no LISTEN connection: only the pool's connections cross the proxy
    "DB_CLIENT_TIMEOUT": f"{DB_CLIENT_TIMEOUT:g}s",
    "STATEMENT_TIMEOUT": "1s",
    "WORKERS": "4",
    "POLL_INTERVAL": "100ms",
    "RECOVERY_INTERVAL": "1s",
    "LEASE_DURATION": "8s",
    "JOB_TIMEOUT": "2s",
    "LOG_LEVEL": "INFO",
    "AUTO_MIGRATE": "false",
}


@pytest.fixture
def proxy(pg15: PgServer) -> Iterator[TcpProxy]:
    with TcpProxy("127.0.0.1", pg15.port) as running:
        yield running


class Feeder:
    """Enqueues a `work` job every `every` seconds, straight into the database, recording
    when each was committed (unix time)."""

    def __init__(self, database_url: str, every: float) -> None:
        self.database_url = database_url
        self.every = every
        self.enqueued: list[tuple[str, float]] = []
        self.failures: list[str] = []
        self._rng = random.Random(7)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._feed()), daemon=True)

    def start(self) -> Feeder:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=30)

    async def _feed(self) -> None:
        from jobqueue import enqueue
        from jobqueue.adapters.postgres.database import create_engine

        engine = create_engine(self.database_url, pool_size=1, application_name="jobqueue-tests")
        try:
            next_at = time.monotonic()
            while not self._stopping.is_set():
                new = NewJob.build(type="work", payload={"ms": self._rng.randint(5, 50)})
                try:
                    async with engine.begin() as connection:
                        job = (await enqueue(connection, new)).job
                    self.enqueued.append((str(job.id), time.time()))
                except Exception as error:
                    self.failures.append(repr(error))
                next_at = max(next_at + self.every, time.monotonic())
                await asyncio.sleep(next_at - time.monotonic())
        finally:
            await engine.dispose()


def is_failed_claim_or_write(record: dict[str, Any]) -> bool:
    message = str(record.get("message", "")).lower()
    if record.get("message") == "job finished":
        return record.get("outcome") == "unrecorded"
    return "fail" in message and ("claim" in message or "outcome" in message)


def until(moment: float) -> None:
    """Let the schedule run up to `moment` (monotonic): not a wait for a condition."""
    time.sleep(max(0.0, moment - time.monotonic()))


@pytest.mark.timeout(180)
def test_a_connection_that_stops_answering_fails_within_the_timeout_and_the_pool_goes_on(
    pg15: PgServer, pg15_database: Database, proxy: TcpProxy, fleet: Fleet
) -> None:
    database = pg15_database
    through_proxy = f"postgresql://postgres@127.0.0.1:{proxy.port}/{database.name}"
    worker = fleet.start("worker", "worker", DATABASE_URL=through_proxy, **WORKER_SETTINGS)
    wait_for_log(worker, "jobqueue worker running", 60)

    feeder = Feeder(database.url, FEED_EVERY).start()
    try:
        until(time.monotonic() + FEED_BEFORE)
        paused_at = time.time()
        resume_at = time.monotonic() + PAUSE
        proxy.pause()
        until(resume_at)
        proxy.resume()
        resumed_at = time.time()
        until(time.monotonic() + FEED_AFTER)
    finally:
        feeder.stop()
        proxy.resume()

    enqueued = dict(feeder.enqueued)
    ids = list(enqueued)
    drain_began = time.monotonic()
    while True:
        rows = database.jobs()
        done = sum(1 for job_id in ids if rows.get(job_id, ("", 0))[0] == "completed")
        if done == len(ids) or time.monotonic() > drain_began + DRAIN_DEADLINE:
            break
        assert worker.process.poll() is None, f"the worker exited:\n{worker.errors()[-3000:]}"
        time.sleep(0.2)
    drained_in = time.monotonic() - drain_began
    alive = worker.process.poll() is None
    finished_at = {
        row["id"]: float(row["at"])
        for row in database.fetch(
            "SELECT id::text AS id, extract(epoch FROM updated_at) AS at FROM jobs"
            " WHERE status = 'completed'"
        )
    }
    fleet.stop(worker)

    records = log_records(worker.stdout)
    failures = [r for r in records if is_failed_claim_or_write(r) and log_time(r) >= paused_at]
    first_failure = min((log_time(r) - paused_at for r in failures), default=None)
    executions = starts_per_job(read_executions(fleet.executions))
    over = {
        job_id: (n, rows.get(job_id, ("", 0))[1])
        for job_id, n in executions.items()
        if n > rows.get(job_id, ("", 0))[1]
    }
    after_resume = [(job_id, at) for job_id, at in feeder.enqueued if at >= resumed_at]
    latencies = [finished_at[job_id] - at for job_id, at in after_resume if job_id in finished_at]
    not_completed = [job_id for job_id in ids if rows.get(job_id, ("", 0))[0] != "completed"]
    figures = {
        "jobs": len(ids),
        "completed": done,
        "drain (s)": round(drained_in, 1),
        "pause (s)": round(resumed_at - paused_at, 2),
        "first failed claim/write after the pause (s)": (
            None if first_failure is None else round(first_failure, 2)
        ),
        "failed claim/write lines": len(failures),
        "first failure message": failures[0]["message"] if failures else None,
        "jobs enqueued after the resume": len(after_resume),
        "slowest of them (s)": round(max(latencies), 2) if latencies else None,
        "jobs run more than once": sum(1 for n in executions.values() if n > 1),
        "executions > attempts": len(over),
        "connections through the proxy": proxy.accepted,
        "feeder failures": len(feeder.failures),
    }
    print("\nhalf-open figures:", figures)

    assert alive, f"the worker died: {figures}"
    assert not feeder.failures, f"enqueueing failed: {feeder.failures[:3]}"
    assert first_failure is not None, f"no claim or outcome write failed after the pause: {figures}"
    assert first_failure <= FAILURE_LOGGED_WITHIN, (
        f"the first failed claim or write was logged {first_failure:.2f}s after the pause: "
        f"{figures}"
    )
    assert after_resume, f"no job was enqueued after the resume: {figures}"
    assert len(latencies) == len(after_resume), f"jobs enqueued after the resume: {figures}"
    assert max(latencies) <= NEW_JOBS_WITHIN, (
        f"a job enqueued after the resume took {max(latencies):.1f}s: {figures}"
    )
    assert not not_completed, f"{len(not_completed)} jobs did not complete: {figures}"
    assert not over, f"executions > attempts: {list(over.items())[:10]} {figures}"
