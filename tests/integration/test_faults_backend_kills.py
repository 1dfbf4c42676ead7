"""Backend kills (issue 11): `jobqueue serve` under a load of HTTP submissions while every
connection of the service (application_name 'jobqueue') is killed with
`pg_terminate_backend` five times a second for 20 seconds.

Nothing is lost (every accepted submission completes), nothing runs twice, and the
service serves throughout: no 500, no submission without an answer, `/healthz` 200;
503s are allowed, and the client's retries get every submission in.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import TYPE_CHECKING

import pytest

from tests.support.fault_fleet import Fleet
from tests.support.fault_records import read_executions, starts_per_job
from tests.support.http_load import Load, Probe

if TYPE_CHECKING:
    from tests.support.pg_server import Database

pytest_plugins = ["tests.support.pg_server"]
pytestmark = pytest.mark.slow

RATE = 60.0  # submissions per second, over THREADS threads
THREADS = 4
SUBMIT_TIMEOUT = 5.0
LOAD_BEFORE = 3.0
KILLING = 20.0
KILL_EVERY = 0.2
LOAD_AFTER = 2.0
MIN_JOBS = 1_000
MORE_LOAD_AT_MOST = 20.0  # after LOAD_AFTER, to reach MIN_JOBS on a slow machine
DRAIN_DEADLINE = 30.0
SERVE_SETTINGS = {
    "WORKERS": "4",
    "LOG_LEVEL": "INFO",
    "POLL_INTERVAL": "100ms",
    "RECOVERY_INTERVAL": "1s",
    # A job whose outcome was never written comes back after a lease: short enough that
    # such a job would run again before the test ends.
    "LEASE_DURATION": "15s",
    "JOB_TIMEOUT": "5s",
}


class Killer:
    """Terminates the service's backends every `every` seconds until stopped."""

    def __init__(self, database: Database, every: float) -> None:
        self.database = database
        self.every = every
        self.rounds = 0
        self.terminated = 0
        self.failures: list[str] = []
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Killer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stopping.is_set():
            began = time.monotonic()
            try:
                self.terminated += self.database.terminate_backends("jobqueue")
            except Exception as error:
                self.failures.append(repr(error))
            self.rounds += 1
            self._stopping.wait(max(0.0, began + self.every - time.monotonic()))


def completed_among(database: Database, job_ids: list[str]) -> int:
    rows = database.fetch(
        "SELECT count(*) AS n FROM jobs WHERE id = ANY($1::uuid[]) AND status = 'completed'",
        job_ids,
    )
    return int(rows[0]["n"])


def until(moment: float) -> None:
    """Let the schedule run up to `moment` (monotonic): not a wait for a condition."""
    time.sleep(max(0.0, moment - time.monotonic()))


@pytest.mark.timeout(180)
def test_killing_the_service_backends_five_times_a_second_loses_nothing_and_reruns_nothing(
    pg15_database: Database, fleet: Fleet
) -> None:
    database = pg15_database
    serve = fleet.start("serve", "serve", DATABASE_URL=database.url, **SERVE_SETTINGS)
    serve.wait_until_healthy(within=60)

    health = Probe(serve.base_url, "/healthz").start()
    load = Load(serve.base_url, rate=RATE, threads=THREADS, timeout=SUBMIT_TIMEOUT).start()
    killer = Killer(database, KILL_EVERY)
    try:
        until(time.monotonic() + LOAD_BEFORE)
        killing_from = time.time()
        killer.start()
        until(time.monotonic() + KILLING)
        killer.stop()
        killing_to = time.time()
        until(time.monotonic() + LOAD_AFTER)
        more_until = time.monotonic() + MORE_LOAD_AT_MOST
        while len(load.accepted) < MIN_JOBS and time.monotonic() < more_until:
            time.sleep(0.1)
        load.stop()
        load.join()

        accepted = sorted(set(load.accepted.values()))
        drain_began = time.monotonic()
        while (done := completed_among(database, accepted)) < len(accepted):
            if time.monotonic() > drain_began + DRAIN_DEADLINE:
                break
            time.sleep(0.2)
        drained_in = time.monotonic() - drain_began
    finally:
        killer.stop()
        load.stop()
        health.stop()
    fleet.stop(serve)

    executions = starts_per_job(read_executions(fleet.executions))
    rerun = {job_id: n for job_id, n in executions.items() if n != 1}
    never_ran = [job_id for job_id in accepted if job_id not in executions]
    statuses = Counter(str(answer.status) for answer in load.answers)
    while_killing = [a for a in load.answers if killing_from <= a.started <= killing_to]
    unanswered = [answer for answer in load.answers if answer.status is None]
    bad_status = [answer for answer in load.answers if answer.status not in (None, 200, 201, 503)]
    unhealthy = [answer for answer in health.answers if answer.status != 200]
    figures = {
        "accepted": len(accepted),
        "answers": dict(sorted(statuses.items())),
        "answers while killing": dict(Counter(str(a.status) for a in while_killing)),
        "slowest answer (s)": round(max((a.seconds for a in load.answers), default=0), 2),
        "given up": len(load.given_up),
        "kill rounds": killer.rounds,
        "backends terminated": killer.terminated,
        "kill failures": len(killer.failures),
        "completed": done,
        "drain (s)": round(drained_in, 1),
        "jobs run more than once": len(rerun),
        "never ran": len(never_ran),
        "healthz probes": len(health.answers),
        "healthz not 200": len(unhealthy),
    }
    print("\nbackend kill figures:", figures)

    assert killer.terminated >= KILLING, f"the service's backends were hardly killed: {figures}"
    assert len(accepted) >= MIN_JOBS, f"fewer than {MIN_JOBS} jobs got in: {figures}"
    assert not load.given_up, f"submissions never got in: {figures}"
    assert not bad_status, f"answers other than 200/201/503: {bad_status[:5]} {figures}"
    assert not unanswered, f"submissions without an answer: {unanswered[:5]} {figures}"
    assert not unhealthy, f"/healthz was not 200: {unhealthy[:5]} {figures}"
    assert done == len(accepted), (
        f"{len(accepted) - done} accepted jobs did not complete: {figures}"
    )
    assert not never_ran, f"accepted jobs never ran: {never_ran[:10]} {figures}"
    assert not rerun, f"jobs ran more than once: {list(rerun.items())[:10]} {figures}"
