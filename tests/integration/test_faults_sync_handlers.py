"""Sync handlers that cannot steal capacity (issue 11), in a real `jobqueue worker`: two
stuck sync handlers with WORKERS=2 keep their slots and their jobs, past their timeout
and past several lease lengths, so the worker claims nothing more and burns no attempts;
and shutdown leaves their jobs to lease recovery instead of releasing them.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from jobqueue import NewJob
from tests.support.fault_fleet import Fleet, enqueue_all
from tests.support.fault_records import read_executions

if TYPE_CHECKING:
    from tests.support.pg_server import Database

pytest_plugins = ["tests.support.pg_server"]
pytestmark = pytest.mark.slow

STUCK_SECONDS = 120.0
LEASE_SECONDS = 4.0
# Long enough to see the timeout pass and the lease come up for renewal three times.
WATCH_SECONDS = 3 * LEASE_SECONDS
DEADLINE = 60.0
WORKER_SETTINGS = {
    "WORKERS": "2",
    "JOB_TIMEOUT": "1s",
    "LEASE_DURATION": f"{LEASE_SECONDS:g}s",
    "DB_CLIENT_TIMEOUT": "2s",
    "STATEMENT_TIMEOUT": "1s",
    "RECOVERY_INTERVAL": "1s",
    "POLL_INTERVAL": "100ms",
    "SHUTDOWN_TIMEOUT": "0s",
    "LOG_LEVEL": "INFO",
    "AUTO_MIGRATE": "false",
}


def started(fleet: Fleet) -> dict[str, int]:
    counts: dict[str, int] = {}
    for record in read_executions(fleet.executions):
        if record.event == "start":
            counts[record.job_id] = counts.get(record.job_id, 0) + 1
    return counts


@pytest.mark.timeout(180)
def test_stuck_sync_handlers_hold_their_slots_and_are_never_released(
    pg15_database: Database, fleet: Fleet
) -> None:
    database = pg15_database
    stuck = enqueue_all(
        database.url,
        [NewJob.build(type="stuck_sync", payload={"seconds": STUCK_SECONDS}) for _ in range(2)],
    )
    worker = fleet.start("worker", "w", DATABASE_URL=database.url, **WORKER_SETTINGS)
    deadline = time.monotonic() + DEADLINE
    while set(started(fleet)) != set(stuck):
        assert time.monotonic() < deadline, f"stuck jobs did not start: {started(fleet)}"
        time.sleep(0.1)
    [waiting] = enqueue_all(database.url, [NewJob.build(type="work", payload={"ms": 1})])

    # Past the timeout and several lease lengths (a bounded window, not a speed check).
    time.sleep(WATCH_SECONDS)
    rows = database.jobs()
    assert worker.process.poll() is None, worker.errors()[-3000:]
    assert [rows[job] for job in stuck] == [("processing", 1), ("processing", 1)]
    assert rows[waiting] == ("pending", 0)
    assert started(fleet) == dict.fromkeys(stuck, 1)

    # Shutdown asks them to stop, waits its bound, and leaves them running: not released.
    assert fleet.stop(worker, within=DEADLINE) == 0
    rows = database.jobs()
    print(
        "sync handlers:",
        {"stuck": [rows[job] for job in stuck], "waiting": rows[waiting], "starts": started(fleet)},
    )
    assert [rows[job] for job in stuck] == [("processing", 1), ("processing", 1)]
    abandoned = [
        record
        for record in fleet.logs_of_all()
        if record.get("message", "").startswith("job finished")
        and record.get("outcome") == "abandoned"
    ]
    assert sorted(record["job_id"] for record in abandoned) == sorted(stuck)
