"""Long jobs (issue 11): with LEASE_DURATION=10s, a 3-minute job completes on its first
attempt in one worker (its lease is renewed, never recovered), and a long job whose
worker is SIGKILLed is recovered and started again by another running worker within
15 seconds of the kill.

Both cases run at once, in three `jobqueue worker` processes of one worker slot each:
W1 runs the 3-minute job; W2 starts the other and is killed; W3 waits to take it over.
This is the longest test of the suite (about 3 minutes).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from jobqueue import NewJob
from tests.support.fault_fleet import Fleet, enqueue_all, wait_for_log
from tests.support.fault_records import Execution, read_executions

if TYPE_CHECKING:
    from tests.support.pg_server import Database
    from tests.support.processes import Service

pytest_plugins = ["tests.support.pg_server"]
# `idle`: its three minutes are waiting; `make test` runs it beside the parallel workers.
pytestmark = [pytest.mark.slow, pytest.mark.idle]

LONG_SECONDS = 180.0
KILLED_JOB_SECONDS = 20.0
RECOVERED_WITHIN = 15.0
STARTUP_DEADLINE = 60.0
SETTLE_DEADLINE = 60.0  # beyond a job's own length, for its end to be recorded
WORKER_SETTINGS = {
    "WORKERS": "1",
    "LEASE_DURATION": "10s",
    "JOB_TIMEOUT": "5m",
    "RECOVERY_INTERVAL": "1s",
    "POLL_INTERVAL": "200ms",
    "LOG_LEVEL": "INFO",
    "AUTO_MIGRATE": "false",
}


def long_job(database: Database, seconds: float) -> str:
    return enqueue_all(database.url, [NewJob.build(type="long", payload={"seconds": seconds})])[0]


def wait_for_execution(
    fleet: Fleet, job_id: str, event: str, within: float, *, pid: int | None = None
) -> Execution:
    """The first `event` line of `job_id` (written by `pid`, when given)."""
    deadline = time.monotonic() + within
    while True:
        for record in read_executions(fleet.executions):
            mine = pid is None or record.pid == pid
            if record.job_id == job_id and record.event == event and mine:
                return record
        if time.monotonic() > deadline:
            raise AssertionError(
                f"no {event} of job {job_id}{'' if pid is None else f' by {pid}'} within "
                f"{within}s; executions: {executions_of(fleet, job_id)}"
            )
        time.sleep(0.1)


def executions_of(fleet: Fleet, job_id: str) -> list[Execution]:
    return [record for record in read_executions(fleet.executions) if record.job_id == job_id]


def alive(*workers: Service) -> None:
    for worker in workers:
        assert worker.process.poll() is None, f"a worker exited:\n{worker.errors()[-3000:]}"


@pytest.mark.timeout(360)
def test_a_three_minute_job_outlives_a_ten_second_lease_and_a_killed_one_is_recovered(
    pg15_database: Database, fleet: Fleet
) -> None:
    database = pg15_database
    url = database.url

    # W1 takes the 3-minute job first: it is the long pole.
    w1 = fleet.start("worker", "w1", DATABASE_URL=url, **WORKER_SETTINGS)
    long_id = long_job(database, LONG_SECONDS)
    long_start = wait_for_execution(fleet, long_id, "start", STARTUP_DEADLINE, pid=w1.process.pid)

    # W2 takes the second (W1's only slot is busy), W3 stands by.
    w2 = fleet.start("worker", "w2", DATABASE_URL=url, **WORKER_SETTINGS)
    victim_id = long_job(database, KILLED_JOB_SECONDS)
    wait_for_execution(fleet, victim_id, "start", STARTUP_DEADLINE, pid=w2.process.pid)
    w3 = fleet.start("worker", "w3", DATABASE_URL=url, **WORKER_SETTINGS)
    wait_for_log(w3, "jobqueue worker running", STARTUP_DEADLINE)

    killed_at = time.time()
    fleet.kill(w2)
    taken_over = wait_for_execution(
        fleet, victim_id, "start", RECOVERED_WITHIN + 30, pid=w3.process.pid
    )
    recovered_in = taken_over.at - killed_at
    wait_for_execution(fleet, victim_id, "end", KILLED_JOB_SECONDS + SETTLE_DEADLINE)

    alive(w1, w3)
    remaining = long_start.at + LONG_SECONDS - time.time()
    long_end = wait_for_execution(fleet, long_id, "end", max(0.0, remaining) + SETTLE_DEADLINE)
    deadline = time.monotonic() + SETTLE_DEADLINE
    while database.jobs()[long_id][0] != "completed" and time.monotonic() < deadline:
        time.sleep(0.2)
    alive(w1, w3)
    for worker in (w1, w3):
        fleet.stop(worker)

    rows = database.jobs()
    long_runs = executions_of(fleet, long_id)
    victim_runs = executions_of(fleet, victim_id)
    figures = {
        "long job (s)": round(long_end.at - long_start.at, 1),
        "long job executions": [(r.event, r.attempt, r.pid) for r in long_runs],
        "long job row": rows[long_id],
        "killed job recovered after (s)": round(recovered_in, 2),
        "killed job executions": [(r.event, r.attempt, r.pid) for r in victim_runs],
        "killed job row": rows[victim_id],
        "pids": {"w1": w1.process.pid, "w2": w2.process.pid, "w3": w3.process.pid},
    }
    print("\nlong job figures:", figures)

    assert [(r.event, r.attempt, r.pid) for r in long_runs] == [
        ("start", 1, w1.process.pid),
        ("end", 1, w1.process.pid),
    ], f"the long job did not run once, on attempt 1, in W1: {figures}"
    assert rows[long_id] == ("completed", 1), f"the long job's row: {figures}"
    assert recovered_in <= RECOVERED_WITHIN, (
        f"the killed job was taken over {recovered_in:.1f}s after the kill: {figures}"
    )
    assert [(r.event, r.attempt, r.pid) for r in victim_runs] == [
        ("start", 1, w2.process.pid),
        ("start", 2, w3.process.pid),
        ("end", 2, w3.process.pid),
    ], f"the killed job's executions: {figures}"
    assert rows[victim_id] == ("completed", 2), f"the killed job's row: {figures}"
