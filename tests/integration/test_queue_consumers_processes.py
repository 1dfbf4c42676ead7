"""Real processes: `GET /queues` counts each queue's live consumers; a queue whose jobs no
process consumes is flagged, until a worker for it starts; a worker killed with SIGKILL
stops counting once its lease-long heartbeat expires."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.processes import Service, free_port, serving, start, until

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("engine")]

# A short lease, so that a killed worker's heartbeat expires soon; the timeouts a lease
# must exceed shortened to allow it.
SHORT_LEASE = {"LEASE_DURATION": "3s", "DB_CLIENT_TIMEOUT": "1500ms", "STATEMENT_TIMEOUT": "1s"}


@pytest.fixture
def serve(database_url: str, tmp_path: Path) -> Iterator[Service]:
    with serving(
        ["serve"],
        tmp_path / "serve",
        DATABASE_URL=database_url,
        QUEUES="default",
        **SHORT_LEASE,
    ) as running:
        yield running


def _queues(service: Service) -> dict[str, dict[str, Any]]:
    answer = httpx.get(f"{service.base_url}/queues", timeout=10).json()
    return {queue["name"]: queue for queue in answer["queues"]}


def test_a_queue_nobody_consumes_is_flagged_until_a_worker_for_it_runs(
    serve: Service, database_url: str, tmp_path: Path
) -> None:
    body = {"type": "sleep", "payload": {"duration": "1ms"}, "queue": "reports"}
    job = httpx.post(f"{serve.base_url}/jobs", json=body, timeout=10).json()

    queues = until(
        lambda: (q := _queues(serve)).get("default", {}).get("consumers") == 1 and q,
        "serve counts as the consumer of default",
    )
    assert (queues["reports"]["consumers"], queues["reports"]["unconsumed"]) == (0, True)
    assert queues["default"]["unconsumed"] is False

    worker = start(
        ["worker"],
        free_port(),
        tmp_path / "worker",
        DATABASE_URL=database_url,
        QUEUES="reports",
        **SHORT_LEASE,
        METRICS_ADDR="off",
    )
    try:
        # Unlisted for a moment if the worker runs the job before its process is seen:
        # a queue without jobs nor consumers is not listed.
        until(
            lambda: _queues(serve).get("reports", {}).get("consumers") == 1,
            "the worker counts as the consumer of reports",
        )
        until(
            lambda: (
                httpx.get(f"{serve.base_url}/jobs/{job['id']}", timeout=10).json()["status"]
                == "completed"
            ),
            "the worker ran the job",
        )
        later = {**body, "delay": "1h"}
        assert httpx.post(f"{serve.base_url}/jobs", json=later, timeout=10).status_code == 201
        worker.send(signal.SIGKILL)
        worker.wait()
        # Its heartbeat expires a lease after the last one.
        until(
            lambda: _queues(serve)["reports"]["consumers"] == 0,
            "the killed worker stops counting",
            within=15,
        )
        # Only a job scheduled for later waits: nothing is stuck yet.
        assert _queues(serve)["reports"]["unconsumed"] is False
    finally:
        worker.stop()
