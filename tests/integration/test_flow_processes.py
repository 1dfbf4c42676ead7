"""Flow control across real processes (issue 28): a queue's concurrency limit holds in the
database's own count of running jobs, sampled every 20 ms, across three worker processes
of 20 workers each: 10 s undisturbed, then 30 s while one of them is SIGKILLed every few
seconds (the undisturbed part only shows the limit reached and held: the killing part
asks everything of it, for the 30 s the issue names); a rate holds in every one-second
window of the jobs' start times, and a rate per key in every window of each key's; a
limit changed through the API is obeyed within a second; with a per-key limit, a key
submitting ten jobs behind another's ten thousand has them all started within a few job
durations."""

from __future__ import annotations

import asyncio
import random
import socket
import time
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.integration.flow_handlers import HELD_SECONDS, MODULE
from tests.support.flow_fleet import SETTINGS, _assert_paced, _drained, _fleet, _worker
from tests.support.postgres import dsn
from tests.support.processes import free_port, start

pytestmark = [pytest.mark.slow]

LIMIT = 5
PROCESSES = 3
CALM_SECONDS = 10.0
KILLING_SECONDS = 30.0
KILL_EVERY = (2.5, 4.0)
SAMPLE_EVERY = 0.02
# From a kill until every slot its process held is free again: the lease, a recovery
# pass, and slack for a loaded machine (2 s was too little on a machine three times
# slower than usual, with the rest of the suite beside it: one slot came back after
# more than 5.5 s, its recovery pass late; 3.5 s too little in a clean clone's CI run
# on 2026-12-05: 7.02 s). What it must catch is a slot never freed, not a late pass.
SLOTS_BACK_WITHIN = 3.0 + 0.5 + 5.5


async def _enqueue(connection: asyncpg.Connection, job_type: str, queue: str, count: int) -> None:
    await connection.execute(
        "INSERT INTO jobs (type, queue, max_attempts)"
        " SELECT $1, $2, 25 FROM generate_series(1, $3::int)",
        job_type,
        queue,
        count,
    )


Sample = tuple[float, int, set[str]]


async def _sample(connection: asyncpg.Connection, seconds: float) -> list[Sample]:
    """(when, running, the processes holding them) every SAMPLE_EVERY for `seconds`: each
    one statement, so one snapshot, counted by the database."""
    samples = []
    end = time.monotonic() + seconds
    while (now := time.monotonic()) < end:
        running, holders = await connection.fetchrow(
            "SELECT count(*), array_agg(DISTINCT worker)"
            " FROM jobs WHERE queue = 'limited' AND status = 'processing'"
        )
        samples.append((now, running, set(holders or ())))
        await asyncio.sleep(max(0.0, now + SAMPLE_EVERY - time.monotonic()))
    return samples


@pytest.mark.timeout(240)
async def test_a_queue_limit_holds_across_processes_and_their_sigkills(
    database_url: str, tmp_path: Path
) -> None:
    connection = await asyncpg.connect(dsn(database_url))
    rng = random.Random(2828)
    try:
        await _enqueue(connection, "held", "limited", 3_000)
        with _fleet() as services:
            # The limit comes from the settings, as a deployment declares it.
            limits = {"QUEUE_LIMITS": f"limited concurrency={LIMIT}"}
            for slot in range(PROCESSES):
                services.append(_worker(database_url, tmp_path / f"w{slot}", **limits))
            for service in services:
                service.wait_until_healthy()

            calm = await _sample(connection, CALM_SECONDS)
            assert max(running for _, running, _ in calm) == LIMIT
            # Reached, and held there: the processes keep its slots busy.
            assert sum(running == LIMIT for _, running, _ in calm) > len(calm) / 2

            # Each killed process (as `jobs.worker` names it), and when it was killed.
            kills: dict[str, float] = {}
            killing: list[Sample] = []
            end = time.monotonic() + KILLING_SECONDS
            while time.monotonic() < end:
                victim = services.pop(rng.randrange(len(services)))
                victim.process.kill()
                victim.process.wait(timeout=30)
                kills[f"{socket.gethostname()}:{victim.process.pid}"] = time.monotonic()
                replacement = _worker(database_url, tmp_path / f"r{len(kills)}", **limits)
                services.append(replacement)
                killing += await _sample(connection, rng.uniform(*KILL_EVERY))
        assert len(kills) >= 6
        assert max(running for _, running, _ in killing) <= LIMIT
        assert max(running for _, running, _ in killing) == LIMIT
        # Every killed process's slots were free again about a lease after its kill.
        for at, _, holders in killing:
            for killed in holders & kills.keys():
                assert at - kills[killed] < SLOTS_BACK_WITHIN, f"{killed} still holds a slot"
        assert any(holders & kills.keys() for _, _, holders in killing), "no kill took a slot"
    finally:
        await connection.close()


RATE = 20
PACED_JOBS = 200


@pytest.mark.timeout(120)
async def test_a_rate_holds_in_every_second_across_processes(
    database_url: str, tmp_path: Path
) -> None:
    connection = await asyncpg.connect(dsn(database_url))
    try:
        await _enqueue(connection, "paced", "paced", PACED_JOBS)
        with _fleet() as services:
            limits = {"QUEUE_LIMITS": f"paced rate={RATE}/s"}
            for slot in range(2):
                services.append(_worker(database_url, tmp_path / f"w{slot}", **limits))
            await _drained(connection, "paced", pacing=PACED_JOBS / RATE)
        starts = sorted(
            row[0].timestamp()
            for row in await connection.fetch(
                "SELECT started_at FROM jobs WHERE queue = 'paced' AND attempts = 1"
            )
        )
        assert len(starts) == PACED_JOBS
        _assert_paced(starts, RATE)
    finally:
        await connection.close()


KEY_RATE = 10
PACED_KEYS = ("t1", "t2", "t3")
PACED_PER_KEY = 50


@pytest.mark.timeout(120)
async def test_a_rate_per_key_holds_in_every_second_of_each_key(
    database_url: str, tmp_path: Path
) -> None:
    connection = await asyncpg.connect(dsn(database_url))
    try:
        for key in PACED_KEYS:
            await connection.execute(
                "INSERT INTO jobs (type, queue, max_attempts, partition_key)"
                " SELECT 'paced_tenant', 'paced_keys', 25, $1 FROM generate_series(1, $2::int)",
                key,
                PACED_PER_KEY,
            )
        with _fleet() as services:
            limits = {"QUEUE_LIMITS": f"paced_keys key_rate={KEY_RATE}/s"}
            for slot in range(2):
                services.append(_worker(database_url, tmp_path / f"w{slot}", **limits))
            await _drained(connection, "paced_keys", pacing=PACED_PER_KEY / KEY_RATE)
        for key in PACED_KEYS:
            starts = sorted(
                row[0].timestamp()
                for row in await connection.fetch(
                    "SELECT started_at FROM jobs WHERE partition_key = $1 AND attempts = 1",
                    key,
                )
            )
            assert len(starts) == PACED_PER_KEY
            _assert_paced(starts, KEY_RATE)
    finally:
        await connection.close()


@pytest.mark.timeout(180)
async def test_a_limit_changed_through_the_api_is_obeyed_everywhere_within_a_second(
    database_url: str, tmp_path: Path
) -> None:
    connection = await asyncpg.connect(dsn(database_url))
    try:
        await _enqueue(connection, "held", "limited", 2_000)
        with _fleet() as services:
            port = free_port()
            serve = start(
                ["serve", "--handlers", MODULE], port, tmp_path / "serve",
                DATABASE_URL=database_url, **SETTINGS,
            )  # fmt: skip
            services.append(serve)
            for slot in range(2):
                services.append(_worker(database_url, tmp_path / f"w{slot}"))
            for service in services:
                service.wait_until_healthy()

            async def limit(concurrency: int) -> float:
                async with httpx.AsyncClient(base_url=serve.base_url) as client:
                    answer = await client.put(
                        "/queues/limited/limits", json={"concurrency": concurrency}
                    )
                assert answer.status_code == 200, answer.text
                assert answer.json()["limits"]["concurrency"] == concurrency
                return time.monotonic()

            before = 0
            for concurrency in (8, 2, 6, 3):
                changed = await limit(concurrency)
                samples = await _sample(connection, 2.0)
                # Within a second, every process obeys: no more than the limit run from
                # then on, and a raised limit is reached (the processes resting after a
                # claim it held back are told at once).
                settled = [running for at, running, _ in samples if at >= changed + 1.0]
                assert max(settled) == concurrency, (concurrency, settled)
                if concurrency > before:
                    # Reached while sampled: the processes were told (under the whole
                    # suite's load it took up to 1.5 s; alone, well under one).
                    first = min(at for at, running, _ in samples if running == concurrency)
                    assert first - changed < 2.0, (concurrency, first - changed)
                before = concurrency
    finally:
        await connection.close()


FLOOD = 10_000
FEW = 10
KEY_LIMIT = 2
QUEUE_LIMIT = 4


@pytest.mark.timeout(120)
async def test_a_key_s_few_jobs_start_within_a_few_job_durations_behind_another_s_flood(
    database_url: str, tmp_path: Path
) -> None:
    connection = await asyncpg.connect(dsn(database_url))
    try:
        # Key A's flood, as its type makes the key: from the payload's tenant.
        await connection.execute(
            "INSERT INTO jobs (type, queue, max_attempts, partition_key, payload)"
            " SELECT 'tenant', 'tenants', 25, 'A', '{\"tenant\": \"A\"}'"
            " FROM generate_series(1, $1::int)",
            FLOOD,
        )
        with _fleet() as services:
            limits = {
                "QUEUE_LIMITS": f"tenants concurrency={QUEUE_LIMIT} key_concurrency={KEY_LIMIT}"
            }
            port = free_port()
            serve = start(
                ["serve", "--handlers", MODULE], port, tmp_path / "serve",
                DATABASE_URL=database_url, **SETTINGS, **limits,
            )  # fmt: skip
            services.append(serve)
            for slot in range(2):
                services.append(_worker(database_url, tmp_path / f"w{slot}", **limits))
            for service in services:
                service.wait_until_healthy()
            # A's jobs run, as many as the limits allow.
            await _sample_keys(connection, 1.0)

            async with httpx.AsyncClient(base_url=serve.base_url) as client:
                answer = await client.post(
                    "/jobs/batch",
                    json={"jobs": [{"type": "tenant", "payload": {"tenant": "B"}}] * FEW},
                )
            assert answer.status_code == 201, answer.text
            assert {job["partition_key"] for job in answer.json()["jobs"]} == {"B"}
            samples = await _sample_keys(connection, FEW / KEY_LIMIT * HELD_SECONDS + 2.0)
        waits = [
            row[0]
            for row in await connection.fetch(
                "SELECT extract(epoch FROM started_at - created_at) FROM jobs"
                " WHERE partition_key = 'B' AND started_at IS NOT NULL ORDER BY 1"
            )
        ]
        assert len(waits) == FEW, f"{len(waits)} of B's jobs started"
        # B runs two at a time: its last job can start no sooner than four rounds of two
        # jobs in; "a few job durations" is that and three more rounds of slack.
        assert waits[-1] < (FEW / KEY_LIMIT + 3) * HELD_SECONDS, waits
        assert max(sum(running.values()) for running in samples) <= QUEUE_LIMIT
        assert max(max(running.values(), default=0) for running in samples) == KEY_LIMIT
        assert any(running.get("B") == KEY_LIMIT for running in samples)
        left = await connection.fetchval(
            "SELECT count(*) FROM jobs WHERE partition_key = 'A' AND status = 'pending'"
        )
        assert left > FLOOD / 2, "A's flood is still mostly waiting"
    finally:
        await connection.close()


async def _sample_keys(connection: asyncpg.Connection, seconds: float) -> list[dict[str, int]]:
    """Each key's running jobs in `tenants`, every SAMPLE_EVERY for `seconds`."""
    samples = []
    end = time.monotonic() + seconds
    while (now := time.monotonic()) < end:
        rows = await connection.fetch(
            "SELECT partition_key, count(*) FROM jobs"
            " WHERE queue = 'tenants' AND status = 'processing' GROUP BY partition_key"
        )
        samples.append({key: count for key, count in rows})
        await asyncio.sleep(max(0.0, now + SAMPLE_EVERY - time.monotonic()))
    return samples
