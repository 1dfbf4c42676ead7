"""jobqueue behind a real PgBouncer in transaction mode (Debian's package, 1.18 here: no
`max_prepared_statements`), with `DATABASE_POOLER=pgbouncer` and `NOTIFY=false`.

Real `jobqueue api` and `jobqueue worker` processes reach the database only through
PgBouncer: submissions over HTTP drain, a failing job backs off and succeeds, one out
of attempts is dead-lettered and retried by an operator, a job longer than its lease
keeps it by renewals, listings page. The same in process, an engine on a PgBouncer of
two server connections, is test_pgbouncer_engine.py's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import pytest

from tests.integration.pgbouncer_handlers import MODULE
from tests.support.api import eventually
from tests.support.direct_queries import CHECKER, database_name, direct
from tests.support.pgbouncer import PgBouncer
from tests.support.postgres import Server, create_database, drop_database
from tests.support.processes import Service, free_port, start

pytestmark = pytest.mark.slow

STATEMENT_TIMEOUT = "1s"
# Short enough that a lease renewal is needed within a few seconds, long enough for the
# rule LEASE_DURATION > 1.5 × DB_CLIENT_TIMEOUT.
LEASE_SECONDS = 3.5
SETTINGS = {
    "DATABASE_POOLER": "pgbouncer",
    "NOTIFY": "false",
    "AUTO_MIGRATE": "false",
    "STATEMENT_TIMEOUT": STATEMENT_TIMEOUT,
    "DB_CLIENT_TIMEOUT": "2s",
    "LEASE_DURATION": f"{int(LEASE_SECONDS * 1000)}ms",
    "RECOVERY_INTERVAL": "500ms",
    "POLL_INTERVAL": "100ms",
    "BACKOFF_BASE": "100ms",
    "BACKOFF_MAX": "200ms",
    "WORKERS": "4",
}
UNBOUNDED = "statement_timeout through the pooler is unlimited"


@pytest.fixture(scope="module")
def bounded_database(database_url: str) -> str:
    """The module's database, with the statement limit the services are configured for
    set where PgBouncer cannot lose it: on the database, for every new server session."""
    name = database_name(database_url)
    asyncio.run(
        direct(
            database_url, f"ALTER DATABASE \"{name}\" SET statement_timeout = '{STATEMENT_TIMEOUT}'"
        )
    )
    return database_url


@pytest.fixture(scope="module")
def services(
    bounded_database: str, pgbouncer_server: PgBouncer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Service, Service]]:
    """`jobqueue api` and `jobqueue worker`, both on the database through PgBouncer."""
    through = pgbouncer_server.url(bounded_database)
    logs = tmp_path_factory.mktemp("pgbouncer-services")
    settings = {**SETTINGS, "DATABASE_URL": through}
    api = start(["api", "--handlers", MODULE], free_port(), logs, **settings)
    port = free_port()
    worker = start(
        ["worker", "--handlers", MODULE], port, logs, METRICS_ADDR=f"127.0.0.1:{port}", **settings
    )
    try:
        api.wait_until_healthy()
        worker.wait_until_healthy()
        yield api, worker
    finally:
        api.stop()
        worker.stop()


@pytest.fixture
def api(services: tuple[Service, Service]) -> Service:
    return services[0]


@pytest.fixture
def worker(services: tuple[Service, Service]) -> Service:
    return services[1]


def submit(api: Service, body: dict[str, Any], **headers: str) -> dict[str, Any]:
    response = httpx.post(f"{api.base_url}/jobs", json=body, headers=headers, timeout=10)
    assert response.status_code == 201, response.text
    answer: dict[str, Any] = response.json()
    return answer


def wait_for(api: Service, job_id: str, status: str, within: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while True:
        body: dict[str, Any] = httpx.get(f"{api.base_url}/jobs/{job_id}", timeout=10).json()
        if body["status"] == status:
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job_id} is {body['status']}, not {status}, after {within}s")
        time.sleep(0.05)


def finished_lines(worker: Service, job_id: str) -> list[dict[str, Any]]:
    return [
        line
        for line in worker.log()
        if line["message"] == "job finished" and line.get("job_id") == job_id
    ]


# --- the services, through PgBouncer ------------------------------------------------------


async def test_http_submissions_are_drained_by_a_worker_through_pgbouncer(api: Service) -> None:
    async with httpx.AsyncClient(base_url=api.base_url, timeout=10) as client:
        responses = await asyncio.gather(
            *(
                client.post("/jobs", json={"type": "sleep", "payload": {"duration": "1ms"}})
                for _ in range(40)
            )
        )
    assert {response.status_code for response in responses} == {201}

    done = [wait_for(api, response.json()["id"], "completed") for response in responses]

    assert {job["attempts"] for job in done} == {1}


async def test_concurrent_duplicate_submissions_create_one_job(api: Service) -> None:
    async with httpx.AsyncClient(base_url=api.base_url, timeout=10) as client:
        responses = await asyncio.gather(
            *(
                client.post(
                    "/jobs",
                    json={"type": "flaky", "payload": {"failures": 0}},
                    headers={"Idempotency-Key": "pgbouncer-twins"},
                )
                for _ in range(10)
            )
        )

    assert sorted(response.status_code for response in responses) == [200] * 9 + [201]
    assert len({response.json()["id"] for response in responses}) == 1


def test_a_failing_job_backs_off_and_then_succeeds(api: Service, worker: Service) -> None:
    job = submit(api, {"type": "flaky", "payload": {"failures": 2}, "max_attempts": 5})

    done = wait_for(api, job["id"], "completed")

    assert done["attempts"] == 3
    outcomes = [
        (line["outcome"], (line.get("retry_in") or 0) > 0)
        for line in finished_lines(worker, job["id"])
    ]
    assert outcomes == [("retried", True), ("retried", True), ("completed", False)]


def test_a_job_out_of_attempts_is_dead_lettered_and_an_operator_retry_runs_it_again(
    api: Service, worker: Service
) -> None:
    job = submit(api, {"type": "doomed", "max_attempts": 2})
    dead = wait_for(api, job["id"], "dead_letter")
    assert (dead["attempts"], dead["last_error"]) == (2, "RuntimeError: this job always fails")

    retried = httpx.post(f"{api.base_url}/jobs/{job['id']}/retry", timeout=10)

    assert retried.status_code == 200, retried.text
    assert retried.json()["status"] == "pending"
    again = wait_for(api, job["id"], "dead_letter")
    assert again["attempts"] == 2
    assert [line["outcome"] for line in finished_lines(worker, job["id"])] == [
        "retried",
        "dead_letter",
        "retried",
        "dead_letter",
    ]


async def test_a_job_longer_than_its_lease_keeps_it_by_renewals(
    api: Service, worker: Service, bounded_database: str
) -> None:
    job = submit(api, {"type": "long", "payload": {"seconds": LEASE_SECONDS * 1.5}})
    job_id = UUID(job["id"])
    leases: list[datetime] = []

    async def lease_of_running_job() -> str:
        [row] = await direct(
            bounded_database, "SELECT status, locked_until FROM jobs WHERE id = $1", job_id
        )
        if row["status"] == "processing" and row["locked_until"] not in leases:
            leases.append(row["locked_until"])
        return str(row["status"])

    await eventually(lease_of_running_job, lambda status: status == "completed", within=30)

    done = wait_for(api, job["id"], "completed")
    assert done["attempts"] == 1  # never recovered, though recovery runs every 500ms
    assert len(leases) >= 2, leases
    assert leases[-1] > leases[0], leases
    assert [line["outcome"] for line in finished_lines(worker, job["id"])] == ["completed"]


def test_listing_pages_through_the_jobs_of_a_status(api: Service) -> None:
    made = {submit(api, {"type": "doomed", "max_attempts": 1})["id"] for _ in range(3)}
    for job_id in made:
        wait_for(api, job_id, "dead_letter")

    seen: list[str] = []
    cursor: str | None = None
    while True:
        params = {"status": "dead_letter", "limit": "2"} | ({"cursor": cursor} if cursor else {})
        page = httpx.get(f"{api.base_url}/jobs", params=params, timeout=10).json()
        seen += [listed["id"] for listed in page["jobs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break

    assert made <= set(seen)
    assert len(seen) == len(set(seen))


async def test_every_statement_of_the_services_goes_through_pgbouncer(
    api: Service, worker: Service, bounded_database: str, pgbouncer_server: PgBouncer
) -> None:
    name = database_name(bounded_database)
    before = pgbouncer_server.stats(name)
    job = submit(api, {"type": "flaky", "payload": {"failures": 0}})
    wait_for(api, job["id"], "completed")

    after = pgbouncer_server.stats(name)
    servers = {
        int(row["remote_pid"])
        for row in pgbouncer_server.show("SERVERS")
        if row["database"] == name
    }
    backends = await direct(
        bounded_database,
        "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name <> $2",
        name,
        CHECKER,
    )

    # Submit, claim, outcome, status reads: transactions PgBouncer counted.
    assert after["total_xact_count"] - before["total_xact_count"] >= 4
    # Each backend on the database is one of PgBouncer's server connections: nothing
    # of the services reached PostgreSQL around it.
    assert backends
    assert {row["pid"] for row in backends} <= servers
    for service in (api, worker):
        assert not [line for line in service.log() if "statement_timeout" in line["message"]]


def test_a_service_warns_when_the_server_does_not_limit_its_statements(
    postgres_server: Server,
    template_database: str,
    pgbouncer_server: PgBouncer,
    tmp_path: Path,
) -> None:
    unbounded = create_database(postgres_server.url, template_database, "pgbouncer-unbounded")
    worker = start(
        ["worker"],
        free_port(),
        tmp_path,
        **{**SETTINGS, "DATABASE_URL": pgbouncer_server.url(unbounded)},
    )
    try:
        deadline = time.monotonic() + 60
        while not [line for line in worker.log() if line["message"].startswith(UNBOUNDED)]:
            assert worker.process.poll() is None, worker.errors()
            assert time.monotonic() < deadline, worker.stdout.read_text()
            time.sleep(0.1)
    finally:
        worker.stop()
        drop_database(postgres_server.url, unbounded)
    [warning] = [line for line in worker.log() if line["message"].startswith(UNBOUNDED)]
    assert warning["level"] == "WARNING"
    assert "ALTER ROLE <role> SET statement_timeout = '1000ms'" in warning["message"]
