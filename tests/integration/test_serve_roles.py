"""`jobqueue api` and `jobqueue worker` apart, and `serve` on its embedded PostgreSQL."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.processes import free_port, start

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("engine")]


def wait_for_status(base_url: str, job_id: str, status: str, within: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while True:
        body: dict[str, Any] = httpx.get(f"{base_url}/jobs/{job_id}/status", timeout=10).json()
        if body["status"] == status or time.monotonic() > deadline:
            return body
        time.sleep(0.1)


def test_jobs_accepted_by_an_api_process_are_run_by_a_separate_worker_process(
    database_url: str, tmp_path: Path
) -> None:
    api = start(["api"], free_port(), tmp_path, DATABASE_URL=database_url)
    # The worker has no HTTP listener; the port it is given stays unused.
    worker = start(
        ["worker"], free_port(), tmp_path, DATABASE_URL=database_url, POLL_INTERVAL="200ms"
    )
    try:
        api.wait_until_healthy()
        response = httpx.post(
            f"{api.base_url}/jobs",
            json={"type": "sleep", "payload": {"duration": "1ms"}},
            timeout=10,
        )
        assert response.status_code == 201, response.text

        done = wait_for_status(api.base_url, response.json()["id"], "completed")

        assert done["status"] == "completed", worker.errors()
        assert not any(line["message"] == "job started" for line in api.log())
        assert any(line["message"] == "job started" for line in worker.log())
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{worker.base_url}/healthz", timeout=2)
    finally:
        api.stop()
        worker.stop()
    assert api.process.returncode == 0, api.errors()
    assert worker.process.returncode == 0, worker.errors()


def test_serve_without_database_url_runs_on_an_embedded_server_and_stops_it(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "pgdata"
    service = start(["serve"], free_port(), tmp_path, JOBQUEUE_DATA_DIR=str(data_dir))
    try:
        service.wait_until_healthy(within=180)
        created = httpx.post(
            f"{service.base_url}/jobs",
            json={"type": "sleep", "payload": {"duration": "1ms"}},
            timeout=10,
        )
        assert created.status_code == 201, created.text
        assert wait_for_status(service.base_url, created.json()["id"], "completed")["status"] == (
            "completed"
        )
        [using] = [line for line in service.log() if line["message"].startswith("using the")]
        assert using["data_dir"] == str(data_dir.resolve())
        postmaster = _postmaster_pid(data_dir)
        assert not _gone(postmaster)
    finally:
        service.send(signal.SIGTERM)
        exit_code = service.wait(timeout=120)

    assert exit_code == 0, service.errors()
    assert not (data_dir / "postmaster.pid").exists()
    assert _gone(postmaster)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # An exited server may linger as a zombie until whatever reaps orphans in this
    # container collects it; it no longer serves anything.
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state == "Z"


def _postmaster_pid(data_dir: Path) -> int:
    return int((data_dir / "postmaster.pid").read_text().splitlines()[0])
