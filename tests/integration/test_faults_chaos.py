"""Chaos (issue 11): three `jobqueue worker` processes drain 5,000 jobs while one of them,
chosen at random, is SIGKILLed and restarted every 2-3 seconds.

Nothing may be lost, nothing dead-lettered, no job completed twice (counted in the
workers' own `job finished` log lines), and no job may have run more often than the
attempts its row counts.
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING

import pytest

from tests.support.fault_fleet import Fleet, enqueue_all, wait_for_log, work_jobs
from tests.support.fault_records import completed_per_job, read_executions, starts_per_job

if TYPE_CHECKING:
    from tests.support.pg_server import Database
    from tests.support.processes import Service

pytest_plugins = ["tests.support.pg_server"]
pytestmark = pytest.mark.slow

JOBS = 5_000
PROCESSES = 3
KILL_EVERY = (2.0, 3.0)  # seconds, uniformly drawn
DRAIN_DEADLINE = 180.0  # from the first kill's schedule: the queue must be empty by then
STARTUP_DEADLINE = 60.0
WORKER_SETTINGS = {
    "WORKERS": "10",
    "METRICS_ADDR": "off",
    "POLL_INTERVAL": "100ms",
    "RECOVERY_INTERVAL": "1s",
    # A killed worker's jobs come back about a lease after the kill; the handlers take
    # at most 50ms, so a short JOB_TIMEOUT keeps the lease valid under every version of
    # the lease rule.
    "LEASE_DURATION": "10s",
    "JOB_TIMEOUT": "1s",
    "LOG_LEVEL": "INFO",
    "AUTO_MIGRATE": "false",
}


@pytest.mark.timeout(300)
def test_random_sigkills_lose_nothing_and_complete_nothing_twice(
    pg15_database: Database, fleet: Fleet
) -> None:
    database = pg15_database
    rng = random.Random(1111)
    ids = enqueue_all(database.url, work_jobs(JOBS, rng))
    assert len(set(ids)) == JOBS

    generation = 0

    def launch(slot: int) -> Service:
        nonlocal generation
        generation += 1
        return fleet.start(
            "worker", f"w{slot}-g{generation}", DATABASE_URL=database.url, **WORKER_SETTINGS
        )

    began = time.monotonic()
    workers = [launch(slot) for slot in range(PROCESSES)]
    for worker in workers:
        wait_for_log(worker, "jobqueue worker running", STARTUP_DEADLINE)

    kills = 0
    deadline = time.monotonic() + DRAIN_DEADLINE
    next_kill = time.monotonic() + rng.uniform(*KILL_EVERY)
    while True:
        counts = database.status_counts()
        if counts.get("pending", 0) + counts.get("processing", 0) == 0:
            break
        now = time.monotonic()
        if now > deadline:
            break
        if now >= next_kill:
            slot = rng.randrange(PROCESSES)
            fleet.kill(workers[slot])
            kills += 1
            workers[slot] = launch(slot)
            next_kill = time.monotonic() + rng.uniform(*KILL_EVERY)
        for worker in workers:
            assert worker.process.poll() is None, f"a worker exited:\n{worker.errors()[-3000:]}"
        time.sleep(0.2)  # the polling period of the loop above
    drained_after = time.monotonic() - began

    for worker in workers:
        fleet.stop(worker)

    rows = database.jobs()
    status = {job_id: state for job_id, (state, _) in rows.items()}
    attempts = {job_id: tries for job_id, (_, tries) in rows.items()}
    executions = starts_per_job(read_executions(fleet.executions))
    completions = completed_per_job(fleet.logs_of_all())

    lost = [job_id for job_id in ids if status.get(job_id) != "completed"]
    dead = [job_id for job_id, state in status.items() if state == "dead_letter"]
    twice = {job_id: n for job_id, n in completions.items() if n > 1}
    over = {
        job_id: (executions[job_id], attempts.get(job_id))
        for job_id in executions
        if executions[job_id] > attempts.get(job_id, 0)
    }
    figures = {
        "jobs": JOBS,
        "processes": PROCESSES,
        "kills": kills,
        "worker processes started": generation,
        "seconds to drain": round(drained_after, 1),
        "completed": sum(1 for state in status.values() if state == "completed"),
        "statuses": dict(sorted(database.status_counts().items())),
        "executions": sum(executions.values()),
        "jobs run more than once": sum(1 for n in executions.values() if n > 1),
        "max executions of a job": max(executions.values(), default=0),
        "max attempts of a job": max(attempts.values(), default=0),
        "completed lines in logs": sum(completions.values()),
        "jobs completed twice (logs)": len(twice),
        "jobs with executions > attempts": len(over),
        "dead letters": len(dead),
        "lost": len(lost),
    }
    print("\nchaos figures:", figures)

    assert not lost, f"{len(lost)} jobs did not complete within {DRAIN_DEADLINE}s: {figures}"
    assert not dead, f"{len(dead)} jobs dead-lettered: {figures}"
    assert not twice, f"jobs completed twice: {list(twice.items())[:10]} {figures}"
    assert not over, f"executions > attempts: {list(over.items())[:10]} {figures}"
    assert kills >= 3, f"too few kills to mean anything: {figures}"
