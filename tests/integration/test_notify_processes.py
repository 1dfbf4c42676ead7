"""`jobqueue api` wakes a separate `jobqueue worker` through NOTIFY; with NOTIFY=false the
worker only polls. Both workers poll every 30s, so a job done within a few seconds was
claimed because of the wake-up (a functional bound, not a speed measurement)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.job import NewJob
from tests.support.processes import STARTUP_DEADLINE, Service, free_port, start, wait_for_log

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("engine")]

POLL_INTERVAL = "30s"
# Far below POLL_INTERVAL, far above a wake-up's real latency on a busy machine.
WAKE_UP_DEADLINE = 12.0


def submit(api: Service) -> str:
    response = httpx.post(
        f"{api.base_url}/jobs", json={"type": "sleep", "payload": {"duration": "1ms"}}, timeout=10
    )
    assert response.status_code == 201, response.text
    job_id: str = response.json()["id"]
    return job_id


def status_of(api: Service, job_id: str) -> str:
    status: str = httpx.get(f"{api.base_url}/jobs/{job_id}/status", timeout=10).json()["status"]
    return status


def wait_for_completion(api: Service, job_id: str, within: float) -> str:
    deadline = time.monotonic() + within
    while (status := status_of(api, job_id)) != "completed" and time.monotonic() < deadline:
        time.sleep(0.05)
    return status


def insert_probe(database_url: str) -> str:
    """A due job, stored before any process starts."""

    async def insert() -> str:
        engine = create_engine(database_url, pool_size=1)
        try:
            new = NewJob.build(type="sleep", payload={"duration": "1ms"}, default_max_attempts=1)
            return str((await PostgresJobStore(engine).submit(new)).job.id)
        finally:
            await engine.dispose()

    return asyncio.run(insert())


@contextmanager
def api_and_idle_worker(database_url: str, logs: Path, notify: str) -> Iterator[Service]:
    """An api and a worker on one database, the worker idle in a 30s poll wait.

    A probe job stored before the worker starts is taken by its first claim; once the
    probe is done, nothing but a wake-up makes the worker claim before 30s have passed.
    """
    probe = insert_probe(database_url)
    api = start(["api"], free_port(), logs, DATABASE_URL=database_url, NOTIFY=notify)
    worker = start(
        ["worker"],
        free_port(),
        logs,
        DATABASE_URL=database_url,
        POLL_INTERVAL=POLL_INTERVAL,
        NOTIFY=notify,
    )
    try:
        api.wait_until_healthy(within=STARTUP_DEADLINE)
        assert wait_for_completion(api, probe, STARTUP_DEADLINE) == "completed", worker.errors()
        if notify == "true":
            wait_for_log(worker, "listening for new jobs", STARTUP_DEADLINE)
        yield api
    finally:
        api.stop()
        worker.stop()
    assert api.process.returncode == 0, api.errors()
    assert worker.process.returncode == 0, worker.errors()


@pytest.mark.direct_database(
    "LISTEN holds a session, which PgBouncer's transaction mode cannot keep"
)
def test_a_job_submitted_to_an_api_process_wakes_an_idle_worker_process(
    database_url: str, tmp_path: Path
) -> None:
    with api_and_idle_worker(database_url, tmp_path, notify="true") as api:
        job_id = submit(api)

        assert wait_for_completion(api, job_id, WAKE_UP_DEADLINE) == "completed"


def test_with_notify_off_an_idle_worker_process_waits_for_its_poll(
    database_url: str, tmp_path: Path
) -> None:
    with api_and_idle_worker(database_url, tmp_path, notify="false") as api:
        job_id = submit(api)

        # Watched for a short while only: enough for a wake-up to have arrived many
        # times over (see the test above), far short of the 30s poll.
        watch_until = time.monotonic() + 2.0
        while time.monotonic() < watch_until:
            assert status_of(api, job_id) == "pending"
            time.sleep(0.1)
