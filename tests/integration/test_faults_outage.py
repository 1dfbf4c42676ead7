"""Database outage (issue 11): `jobqueue serve` under a steady load of HTTP submissions
while its PostgreSQL is stopped for 5 seconds (`pg_ctl stop -m immediate`, like a crash)
and started again.

Every accepted submission completes; no job whose handler finished during the outage
runs again (its outcome is written once the database is back); `/healthz` answers 200
throughout; `/readyz` is 503 during the outage and 200 within 5 s after; submissions
during the outage answer 503 with a Retry-After within 5 s.

A few longer `work` jobs (1.5-3.5 s) are submitted just before the stop, so that some
handlers are sure to finish while the database is down.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.support.fault_fleet import Fleet
from tests.support.fault_records import read_executions, starts_per_job
from tests.support.http_load import Load, Probe

if TYPE_CHECKING:
    from tests.support.pg_server import Database, PgServer

pytest_plugins = ["tests.support.pg_server"]
pytestmark = pytest.mark.slow

RATE = 20.0  # submissions per second
SUBMIT_TIMEOUT = 5.0
LOAD_BEFORE = 4.0  # seconds of load before the outage
OUTAGE = 5.0
LOAD_AFTER = 10.0
DRAIN_DEADLINE = 30.0
READY_AGAIN_WITHIN = 5.0
LONGER_JOBS_MS = (1500, 2500, 3500)
SERVE_SETTINGS = {
    "WORKERS": "4",
    "LOG_LEVEL": "INFO",
    "POLL_INTERVAL": "100ms",
    "RECOVERY_INTERVAL": "1s",
    # Long enough for a lease to outlive the outage, short enough that a job left to
    # recovery is run again before the test ends.
    "LEASE_DURATION": "15s",
    "JOB_TIMEOUT": "5s",
}


def completed_among(database: Database, job_ids: list[str]) -> int:
    rows = database.fetch(
        "SELECT count(*) AS n FROM jobs WHERE id = ANY($1::uuid[]) AND status = 'completed'",
        job_ids,
    )
    return int(rows[0]["n"])


def wait_until_started(fleet: Fleet, job_ids: set[str], within: float) -> None:
    deadline = time.monotonic() + within
    while not job_ids <= set(starts_per_job(read_executions(fleet.executions))):
        if time.monotonic() > deadline:
            raise AssertionError(f"jobs {job_ids} did not start within {within}s")
        time.sleep(0.02)


def until(moment: float) -> None:
    """Let the schedule run up to `moment` (monotonic): not a wait for a condition."""
    time.sleep(max(0.0, moment - time.monotonic()))


@pytest.mark.timeout(180)
@pytest.mark.direct_database(
    "asserts a 503 within 5 s for a submission made while the server is down: behind "
    "PgBouncer it waits in PgBouncer's queue until DB_CLIENT_TIMEOUT (docs/design.md)"
)
def test_a_five_second_outage_under_load_loses_nothing_and_reruns_nothing(
    own_pg15: PgServer, own_pg15_database: Database, fleet: Fleet
) -> None:
    database = own_pg15_database
    serve = fleet.start("serve", "serve", DATABASE_URL=database.url, **SERVE_SETTINGS)
    serve.wait_until_healthy(within=60)

    health = Probe(serve.base_url, "/healthz").start()
    ready = Probe(serve.base_url, "/readyz").start()
    load = Load(serve.base_url, rate=RATE, timeout=SUBMIT_TIMEOUT).start()
    longer: dict[str, str] = {}
    try:
        until(time.monotonic() + LOAD_BEFORE)
        for ms in LONGER_JOBS_MS:
            response = httpx.post(
                f"{serve.base_url}/jobs",
                json={"type": "work", "payload": {"ms": ms}},
                timeout=SUBMIT_TIMEOUT,
            )
            assert response.status_code == 201, response.text
            longer[response.json()["id"]] = str(ms)
        wait_until_started(fleet, set(longer), within=10)

        stopping = time.time()
        back_at = time.monotonic() + OUTAGE
        own_pg15.stop("immediate")
        stopped = time.time()
        until(back_at)
        starting = time.time()
        own_pg15.start()
        started = time.time()

        until(time.monotonic() + LOAD_AFTER)
        load.stop()
        load.join()

        accepted = sorted(set(load.accepted.values()) | set(longer))
        drain_began = time.monotonic()
        drain_deadline = drain_began + DRAIN_DEADLINE
        while (done := completed_among(database, accepted)) < len(accepted):
            if time.monotonic() > drain_deadline:
                break
            time.sleep(0.2)
        drained_in = time.monotonic() - drain_began
    finally:
        load.stop()
        health.stop()
        ready.stop()
    fleet.stop(serve)

    records = read_executions(fleet.executions)
    executions = starts_per_job(records)
    finished_during = {
        record.job_id
        for record in records
        if record.event == "end" and stopping <= record.at <= started
    }
    rerun = {job_id: n for job_id, n in executions.items() if n != 1}
    never_ran = [job_id for job_id in accepted if job_id not in executions]
    statuses = Counter(answer.status for answer in load.answers)
    during = [answer for answer in load.answers if stopped <= answer.started <= starting]
    slow = [answer for answer in load.answers if answer.seconds > SUBMIT_TIMEOUT]
    unanswered = [answer for answer in load.answers if answer.status is None]
    bad_status = [answer for answer in load.answers if answer.status not in (None, 200, 201, 503)]
    without_retry_after = [a for a in load.answers if a.status == 503 and not a.retry_after]
    unhealthy = [answer for answer in health.answers if answer.status != 200]
    not_ready = [a for a in ready.answers if a.status == 503 and stopping <= a.started <= started]
    ready_again = [a.ended for a in ready.answers if a.started >= started and a.status == 200]
    ready_after = (min(ready_again) - started) if ready_again else None

    figures = {
        "accepted": len(accepted),
        "answers": dict(sorted((str(k), v) for k, v in statuses.items())),
        "submissions during the outage": len(during),
        "their statuses": dict(Counter(str(answer.status) for answer in during)),
        "slowest submission answer (s)": round(
            max((a.seconds for a in load.answers), default=0), 2
        ),
        "given up": len(load.given_up),
        "outage (s)": round(started - stopping, 2),
        "handlers finished during the outage": len(finished_during),
        "of which ran again": sum(1 for job_id in finished_during if executions[job_id] > 1),
        "jobs run more than once": len(rerun),
        "completed": done,
        "drain (s)": round(drained_in, 1),
        "healthz probes": len(health.answers),
        "healthz not 200": len(unhealthy),
        "readyz 503 during the outage": len(not_ready),
        "readyz 200 again after (s)": None if ready_after is None else round(ready_after, 2),
    }
    print("\noutage figures:", figures)

    assert len(finished_during) >= len(LONGER_JOBS_MS), (
        f"too few jobs ran across the outage: {figures}"
    )
    assert done == len(accepted), (
        f"{len(accepted) - done} accepted jobs did not complete: {figures}"
    )
    assert not never_ran, f"accepted jobs never ran: {never_ran[:10]} {figures}"
    assert not rerun, f"jobs ran more than once: {list(rerun.items())[:10]} {figures}"
    assert not unhealthy, f"/healthz was not 200: {unhealthy[:5]} {figures}"
    assert not_ready, f"/readyz never answered 503 during the outage: {figures}"
    assert ready_after is not None, f"/readyz never answered 200 after the restart: {figures}"
    assert ready_after <= READY_AGAIN_WITHIN, (
        f"/readyz was not 200 within {READY_AGAIN_WITHIN}s of the restart: {figures}"
    )
    assert during, f"no submission was made during the outage: {figures}"
    assert all(a.status == 503 and a.retry_after for a in during), (
        f"submissions during the outage were not all 503 with Retry-After: {during[:5]}"
    )
    assert not unanswered, f"submissions got no answer (timeout or error): {unanswered[:5]}"
    assert not slow, f"submissions took longer than {SUBMIT_TIMEOUT}s: {slow[:5]}"
    assert not bad_status, f"submissions answered other than 200/201/503: {bad_status[:5]}"
    assert not without_retry_after, f"503 without Retry-After: {without_retry_after[:5]}"
    assert not load.given_up, f"submissions given up: {len(load.given_up)} {figures}"
