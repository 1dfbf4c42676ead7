"""How `jobqueue serve` stops: drain, let jobs finish, release what outlives the grace."""

from __future__ import annotations

import contextlib
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.schema import jobs
from tests.support.processes import Service, free_port, run, start, until

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("engine")]


@pytest.fixture
def launch(database_url: str, tmp_path: Path) -> Iterator[Any]:
    started: list[Service] = []

    def launch(**settings: str) -> Service:
        logs = tmp_path / f"serve-{len(started)}"
        service = start(["serve"], free_port(), logs, DATABASE_URL=database_url, **settings)
        started.append(service)
        service.wait_until_healthy()
        return service

    yield launch
    for service in started:
        service.stop()


def submit_sleep(service: Service, duration: str) -> str:
    response = httpx.post(
        f"{service.base_url}/jobs",
        json={"type": "sleep", "payload": {"duration": duration}},
        timeout=10,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def wait_until_processing(service: Service, job_id: str, within: float = 60) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        status = httpx.get(f"{service.base_url}/jobs/{job_id}/status", timeout=10).json()
        if status["status"] == "processing":
            return
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} was not claimed within {within}s")


async def job_row(engine: AsyncEngine, job_id: str) -> dict[str, Any]:
    async with engine.connect() as connection:
        row = (await connection.execute(select(jobs).where(jobs.c.id == job_id))).mappings().one()
    return dict(row)


async def test_sigterm_lets_a_running_job_finish_and_exits_0(
    launch: Any, engine: AsyncEngine
) -> None:
    service = launch(SHUTDOWN_TIMEOUT="60s")
    job_id = submit_sleep(service, "2s")
    wait_until_processing(service, job_id)

    service.send(signal.SIGTERM)

    assert service.wait() == 0, service.errors()
    row = await job_row(engine, job_id)
    assert (row["status"], row["attempts"]) == ("completed", 1)
    messages = [line["message"] for line in service.log()]
    assert "SIGTERM received: shutting down gracefully (again to force)" in messages
    assert messages[-1] == "stopped"


async def test_a_job_outliving_the_shutdown_timeout_is_released_with_its_attempt_given_back(
    launch: Any, engine: AsyncEngine
) -> None:
    service = launch(SHUTDOWN_TIMEOUT="1s")
    job_id = submit_sleep(service, "10m")
    wait_until_processing(service, job_id)

    service.send(signal.SIGTERM)

    assert service.wait() == 0, service.errors()
    row = await job_row(engine, job_id)
    assert (row["status"], row["attempts"], row["locked_until"]) == ("pending", 0, None)


def test_readyz_turns_503_while_the_drain_delay_keeps_serving(launch: Any) -> None:
    service = launch(DRAIN_DELAY="6s")
    assert httpx.get(f"{service.base_url}/readyz", timeout=10).status_code == 200

    service.send(signal.SIGTERM)

    deadline = time.monotonic() + 30
    ready = httpx.get(f"{service.base_url}/readyz", timeout=10)
    while ready.status_code != 503 and time.monotonic() < deadline:
        time.sleep(0.05)
        ready = httpx.get(f"{service.base_url}/readyz", timeout=10)
    assert ready.status_code == 503
    assert ready.json() == {"error": "not ready: shutting down"}
    # Still serving everything else during the drain: probes and the API itself.
    assert httpx.get(f"{service.base_url}/healthz", timeout=10).status_code == 200
    submitted = httpx.post(
        f"{service.base_url}/jobs", json={"type": "sleep", "payload": {"duration": "1s"}}
    )
    assert submitted.status_code == 201
    assert service.wait() == 0, service.errors()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{service.base_url}/healthz", timeout=2)


def test_a_second_signal_exits_at_once_with_130(launch: Any) -> None:
    service = launch(SHUTDOWN_TIMEOUT="10m")
    job_id = submit_sleep(service, "10m")
    wait_until_processing(service, job_id)

    service.send(signal.SIGTERM)
    # The second signal only after the first is handled: sent before, it would be the
    # first, and begin the 10-minute drain.
    until(
        lambda: any(line["message"].startswith("SIGTERM received") for line in service.log()),
        "serve handled SIGTERM",
    )
    service.send(signal.SIGINT)

    assert service.wait(timeout=60) == 130
    assert "Traceback" not in service.errors()


def test_a_taken_port_fails_clearly_without_a_traceback(database_url: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        result = run(["serve"], DATABASE_URL=database_url, HTTP_ADDR=f"127.0.0.1:{port}")

    assert result.returncode == 1
    assert f"HTTP_ADDR 127.0.0.1:{port} is already in use" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


@pytest.mark.parametrize(
    ("command", "host", "address"),
    [("serve", "127.0.0.1", "127.0.0.1:8080"), ("api", "0.0.0.0", ":8080")],
)
def test_unset_http_addr_binds_loopback_for_serve_and_every_interface_for_api(
    database_url: str, command: str, host: str, address: str
) -> None:
    # The port is held here, or by another process on the machine (then as good): either
    # way the command refuses to start, naming the address it tried.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        with contextlib.suppress(OSError):
            taken.bind((host, 8080))
            taken.listen()

        result = run([command], timeout=60, DATABASE_URL=database_url)

    assert result.returncode == 1, result.stderr
    assert f"HTTP_ADDR {address} is already in use" in result.stderr
