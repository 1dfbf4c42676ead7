"""Cancelling a running job from another process: the `jobqueue api` process answers
with the job cancelled, and the `jobqueue worker` process running it stops its handler
within a second, by the notification, or (with NOTIFY=false) at its next lease renewal.
The handler's late return is never written over the cancellation. A snoozing job, run by
a real worker process, keeps its attempts.
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.cancel_handlers import MODULE
from tests.support.processes import Service, free_port, start, until

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("engine")]


def _running(workers: list[Service]) -> bool:
    return all(any(r["message"] == "jobqueue worker running" for r in w.log()) for w in workers)


def _told_to_stop(workers: list[Service], job_id: str) -> list[dict[str, Any]]:
    return [
        record
        for worker in workers
        for record in worker.log()
        if record["message"].startswith("handler told to stop: ") and record.get("job_id") == job_id
    ]


def _cancel_running_job(
    api: Service, workers: list[Service], within: float
) -> tuple[dict[str, Any], float, dict[str, Any]]:
    """Submit a stubborn job, cancel it once it runs; return the cancel's answer, when it
    was sent, and the worker's record of being told to stop."""
    with httpx.Client(base_url=api.base_url, timeout=10) as client:
        submitted = client.post(
            "/jobs", json={"type": "stubborn", "payload": {"seconds": 60, "late": 1.5}}
        )
        assert submitted.status_code == 201, submitted.text
        job_id = submitted.json()["id"]
        until(
            lambda: client.get(f"/jobs/{job_id}").json()["status"] == "processing",
            "the job runs",
        )
        sent = time.time()
        cancelled = client.post(f"/jobs/{job_id}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        (stopped,) = until(lambda: _told_to_stop(workers, job_id), "the handler stops", 10)
        assert datetime.fromisoformat(stopped["ts"]).timestamp() - sent <= within
        # Past the handler's late return: nothing was written over the cancellation.
        time.sleep(2.5)
        after = client.get(f"/jobs/{job_id}").json()
        return cancelled.json(), sent, {**stopped, "after": after}


def _services(tmp_path: Path, database_url: str, **worker_settings: str) -> list[Service]:
    api = start(
        ["api", "--handlers", MODULE], free_port(), tmp_path / "api", DATABASE_URL=database_url
    )
    workers = [
        start(
            ["worker", "--handlers", MODULE],
            free_port(),
            tmp_path / f"worker{n}",
            DATABASE_URL=database_url,
            **worker_settings,
        )
        for n in range(2)
    ]
    return [api, *workers]


@pytest.mark.direct_database("the workers LISTEN, which PgBouncer's transaction mode cannot keep")
def test_a_running_job_is_cancelled_within_a_second_in_the_process_running_it(
    database_url: str, tmp_path: Path
) -> None:
    api, *workers = _services(tmp_path, database_url)
    try:
        api.wait_until_healthy()
        until(lambda: _running(workers), "the workers run")

        answer, _, stopped = _cancel_running_job(api, workers, within=1.0)

        assert answer["status"] == "cancelled"
        assert stopped["message"] == "handler told to stop: cancelled"
        after = stopped["after"]
        assert after["status"] == "cancelled"
        assert [(a["attempt"], a["outcome"]) for a in after["history"]] == [(1, "cancelled")]
        assert after["finished_at"] == answer["finished_at"]
        ran_it = [w for w in workers if any(r.get("job_id") == answer["id"] for r in w.log())]
        (worker,) = ran_it
        finished = [r for r in worker.log() if r["message"].startswith("job finished")]
        assert [r["outcome"] for r in finished] == ["cancelled"]
        # Cancelling it again, or a job that completed, is refused.
        with httpx.Client(base_url=api.base_url, timeout=10) as client:
            again = client.post(f"/jobs/{answer['id']}/cancel")
            assert again.status_code == 409
            assert "it is cancelled" in again.json()["error"]
        for service in (api, *workers):
            assert service.process.poll() is None, service.errors()
    finally:
        for service in (api, *workers):
            service.stop()


def test_without_notifications_a_cancel_stops_the_handler_at_the_next_renewal(
    database_url: str, tmp_path: Path
) -> None:
    # Renewals every second (a third of the lease); the timeouts the lease must exceed
    # shortened to allow it.
    api, *workers = _services(
        tmp_path,
        database_url,
        NOTIFY="false",
        LEASE_DURATION="3s",
        DB_CLIENT_TIMEOUT="1500ms",
        STATEMENT_TIMEOUT="1s",
    )
    try:
        api.wait_until_healthy()
        until(lambda: _running(workers), "the workers run")

        answer, _, stopped = _cancel_running_job(api, workers, within=2.0)

        assert answer["status"] == "cancelled"
        # The renewal cannot tell a cancel from a recovery: the handler hears of a lost lease.
        assert stopped["message"] == "handler told to stop: lease_lost"
        assert stopped["after"]["status"] == "cancelled"
    finally:
        for service in (api, *workers):
            service.stop()


def test_a_snoozing_job_run_by_a_worker_process_keeps_its_attempts(
    database_url: str, tmp_path: Path
) -> None:
    api, *workers = _services(tmp_path, database_url, POLL_INTERVAL="100ms")
    try:
        api.wait_until_healthy()
        until(lambda: _running(workers), "the workers run")
        with httpx.Client(base_url=api.base_url, timeout=10) as client:
            submitted = client.post(
                "/jobs",
                json={
                    "type": "not_yet",
                    "payload": {"times": 3, "seconds": 0.2},
                    "max_attempts": 1,
                },
            )
            job_id = submitted.json()["id"]
            done = until(
                lambda: (
                    (job := client.get(f"/jobs/{job_id}").json())["status"] == "completed" and job
                ),
                "the job completes",
            )
        assert (done["attempts"], done["snoozes"]) == (1, 3)
        assert [(a["attempt"], a["outcome"]) for a in done["history"]] == [(1, "completed")]
    finally:
        for service in (api, *workers):
            service.stop()
