"""`jobqueue worker` serves /metrics, /healthz and /readyz on METRICS_ADDR (real processes)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from uuid import UUID

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.fields import JsonValue
from jobqueue.domain.job import NewJob
from jobqueue.domain.status import Status
from tests.support.processes import Service, free_port, run, start

pytestmark = pytest.mark.slow

GATED_HANDLERS = "tests.integration.worker_gate_handlers"


def start_worker(tmp_path: Path, database_url: str, metrics_port: int, **settings: str) -> Service:
    # `start` points HTTP_ADDR and the service's base URL at the port it is given; a
    # worker serves no API, so there only the METRICS_ADDR listener answers.
    defaults = {
        "DATABASE_URL": database_url,
        "METRICS_ADDR": f"127.0.0.1:{metrics_port}",
        "POLL_INTERVAL": "200ms",
    }
    return start(["worker"], metrics_port, tmp_path, **(defaults | settings))


async def get(url: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as client:
        return await client.get(url)


# The labels of the `sleep` jobs these tests submit.
SLEEP = {"queue": "default", "type": "sleep"}


async def sample(base_url: str, name: str, **labels: str) -> float | None:
    """The value of one sample on `base_url`/metrics, None when it is absent."""
    response = await get(f"{base_url}/metrics")
    response.raise_for_status()
    for family in text_string_to_metric_families(response.text):
        for metric in family.samples:
            if metric.name == name and metric.labels == labels:
                return float(metric.value)
    return None


async def wait_until(condition: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + 60
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within 60s: {what}")
        await asyncio.sleep(0.1)


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process `pid` listens on, from its descriptors and /proc/net."""
    inodes = set()
    for descriptor in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(descriptor)
        except FileNotFoundError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in inodes:  # 0A: TCP_LISTEN
                ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


async def submit(engine: AsyncEngine, job_type: str, payload: JsonValue) -> UUID:
    store = PostgresJobStore(engine)
    new = NewJob.build(type=job_type, payload=payload, default_max_attempts=1)
    return (await store.submit(new)).job.id


async def status_of(engine: AsyncEngine, job_id: UUID) -> Status:
    return (await PostgresJobStore(engine).get(job_id)).status


async def test_a_worker_serves_probes_and_counts_its_jobs_on_metrics_addr(
    database_url: str, engine: AsyncEngine, tmp_path: Path
) -> None:
    port = free_port()
    worker = start_worker(tmp_path, database_url, port)
    try:
        worker.wait_until_healthy()
        ready = await get(f"{worker.base_url}/readyz")
        assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
        # A (queue, type)'s series appear with its first job.
        assert await sample(worker.base_url, "jobs_completed_total", **SLEEP) is None

        await submit(engine, "sleep", {"duration": "1ms"})

        async def completed_one() -> bool:
            return await sample(worker.base_url, "jobs_completed_total", **SLEEP) == 1

        await wait_until(completed_one, "jobs_completed_total became 1")
        duration_count = await sample(
            worker.base_url, "job_processing_duration_seconds_count", **SLEEP, outcome="completed"
        )
        assert duration_count == 1
        pickups = await sample(worker.base_url, "job_pickup_latency_seconds_count", **SLEEP)
        assert pickups == 1

        # The worker refreshes the depth gauge itself: no API may run anywhere.
        async def depth_exported() -> bool:
            return await sample(worker.base_url, "jobs_queue_depth", status="pending") == 0

        await wait_until(depth_exported, "jobs_queue_depth was exported")
        assert listening_ports(worker.process.pid) == {port}
        assert any(line.get("metrics_addr") == f"127.0.0.1:{port}" for line in worker.log())
    finally:
        worker.send(signal.SIGTERM)
        exit_code = worker.wait(timeout=90)
    assert exit_code == 0, worker.errors()


async def test_the_metrics_listener_outlives_the_drain_and_readyz_turns_503(
    database_url: str, engine: AsyncEngine, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    # A grace long enough that the job is never released while the test looks on.
    worker = start_worker(
        tmp_path,
        database_url,
        free_port(),
        JOBQUEUE_HANDLERS=GATED_HANDLERS,
        SHUTDOWN_TIMEOUT="300s",
    )
    try:
        worker.wait_until_healthy()
        job_id = await submit(engine, "gated", {"path": str(gate)})

        async def claimed() -> bool:
            return await status_of(engine, job_id) is Status.PROCESSING

        await wait_until(claimed, "the gated job was claimed")

        worker.send(signal.SIGTERM)

        async def draining() -> bool:
            return (await get(f"{worker.base_url}/readyz")).status_code == 503

        await wait_until(draining, "/readyz answered 503 while draining")
        why = (await get(f"{worker.base_url}/readyz")).json()
        assert why == {"error": "not ready: shutting down"}
        assert (await get(f"{worker.base_url}/healthz")).status_code == 200
        gated = {"queue": "default", "type": "gated"}
        assert await sample(worker.base_url, "jobs_completed_total", **gated) == 0
        gate.touch()
        exit_code = worker.wait(timeout=90)
    finally:
        gate.touch()
        worker.stop()

    assert exit_code == 0, worker.errors()
    assert await status_of(engine, job_id) is Status.COMPLETED


async def test_a_worker_with_metrics_off_listens_on_no_port(
    database_url: str, engine: AsyncEngine, tmp_path: Path
) -> None:
    worker = start_worker(tmp_path, database_url, free_port(), METRICS_ADDR="off")
    try:
        job_id = await submit(engine, "sleep", {"duration": "1ms"})

        async def completed() -> bool:
            assert worker.process.poll() is None, worker.errors()
            return await status_of(engine, job_id) is Status.COMPLETED

        await wait_until(completed, "the worker completed the job")

        assert listening_ports(worker.process.pid) == set()
        with pytest.raises(httpx.TransportError):
            await get(f"{worker.base_url}/healthz")
    finally:
        worker.stop()
    assert worker.process.returncode == 0, worker.errors()


@pytest.mark.usefixtures("engine")
def test_a_taken_metrics_port_stops_the_worker_with_a_clear_message(database_url: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"

        result = run(["worker"], DATABASE_URL=database_url, METRICS_ADDR=address)

    assert result.returncode == 1
    assert f"METRICS_ADDR {address} is already in use" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


@pytest.mark.usefixtures("engine")
def test_metrics_addr_on_the_api_port_is_refused_before_starting(database_url: str) -> None:
    address = f"127.0.0.1:{free_port()}"

    result = run(
        ["serve"], timeout=60, DATABASE_URL=database_url, HTTP_ADDR=address, METRICS_ADDR=address
    )

    assert result.returncode == 1
    assert f"METRICS_ADDR {address} is the port of HTTP_ADDR {address}" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_a_bad_metrics_addr_is_a_usage_error() -> None:
    result = run(["worker"], METRICS_ADDR="9090")

    assert result.returncode == 2
    assert "METRICS_ADDR: '9090' has no port" in result.stderr


@pytest.mark.usefixtures("engine")
def test_an_api_given_metrics_addr_serves_its_metrics_there_too(
    database_url: str, tmp_path: Path
) -> None:
    metrics_port = free_port()
    api = start(
        ["api"],
        free_port(),
        tmp_path,
        DATABASE_URL=database_url,
        METRICS_ADDR=f"127.0.0.1:{metrics_port}",
    )
    metrics_url = f"http://127.0.0.1:{metrics_port}"
    try:
        api.wait_until_healthy()
        created = httpx.post(
            f"{api.base_url}/jobs",
            json={"type": "sleep", "payload": {"duration": "1ms"}},
            timeout=10,
        )
        assert created.status_code == 201, created.text

        assert asyncio.run(sample(metrics_url, "jobs_submitted_total")) == 1
        assert httpx.get(f"{metrics_url}/readyz", timeout=10).status_code == 200
        # Only the operations routes: the jobs API stays on HTTP_ADDR.
        assert httpx.get(f"{metrics_url}/jobs/{created.json()['id']}", timeout=10).status_code == (
            404
        )
    finally:
        api.stop()
    assert api.process.returncode == 0, api.errors()
