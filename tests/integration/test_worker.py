"""Worker pools against a real PostgreSQL: several processes' worth of pools on one
database, leases that run out, stale outcomes, and a job that kills its process."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.errors import Permanent
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.outcome import LEASE_EXPIRED_ERROR
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.status import Status
from tests.fakes import RecordingObserver
from tests.integration.worker_victim import KILLED_BY_JOB
from tests.support.job_rows import count_jobs
from tests.support.worker_pools import (
    CONFIG,
    DEADLINE_SECONDS,
    SHORT_LEASE,
    FrozenStore,
    pool_on_own_engine,
    recover_when_expired,
    until,
)

PROJECT_ROOT = Path(__file__).resolve().parents[2]


async def submit(store: PostgresJobStore, job_type: str, max_attempts: int = 3) -> Job:
    return (await store.submit(NewJob(type=job_type, max_attempts=max_attempts))).job


async def test_three_pools_on_one_database_run_each_job_exactly_once(
    engine: AsyncEngine, database_url: str
) -> None:
    store = PostgresJobStore(engine)
    executions: Counter[UUID] = Counter()
    registry = Registry()

    @registry.handler("count")
    async def count(ctx: JobContext, payload: Any) -> None:
        executions[ctx.job_id] += 1
        await asyncio.sleep(0)

    submitted = {(await submit(store, "count")).id for _ in range(200)}

    async def all_completed() -> bool:
        return await count_jobs(engine, Status.COMPLETED) == 200

    async with (
        pool_on_own_engine(database_url, registry),
        pool_on_own_engine(database_url, registry),
        pool_on_own_engine(database_url, registry),
    ):
        await until(all_completed, "all 200 jobs completed")

    assert set(executions) == submitted
    assert set(executions.values()) == {1}
    assert {(await store.get(job_id)).attempts for job_id in submitted} == {1}


async def test_expired_lease_is_recovered_and_the_job_completes_in_another_pool(
    engine: AsyncEngine, database_url: str
) -> None:
    store = PostgresJobStore(engine)
    gate_a = asyncio.Event()
    started_a: list[int] = []
    ran_b: list[int] = []
    observer_a = RecordingObserver()

    registry_a = Registry()

    @registry_a.handler("report")
    async def stuck(ctx: JobContext, payload: Any) -> None:
        started_a.append(ctx.attempt)
        await gate_a.wait()

    registry_b = Registry()

    @registry_b.handler("report")
    async def report(ctx: JobContext, payload: Any) -> None:
        ran_b.append(ctx.attempt)

    job = await submit(store, "report")
    slow_a = replace(CONFIG, workers=1, lease_duration=SHORT_LEASE)
    async with pool_on_own_engine(database_url, registry_a, slow_a, observer_a, FrozenStore):
        await until(_holds(lambda: started_a == [1]), "pool A runs the job")
        recovered = await recover_when_expired(store, job.id)
        assert (recovered.status, recovered.attempts) == (Status.PENDING, 1)

        async with pool_on_own_engine(database_url, registry_b):
            await until(_status_is(store, job.id, Status.COMPLETED), "pool B completes it")

        # Pool A's handler finally returns; its outcome must not land.
        gate_a.set()
        await until(_holds(lambda: bool(observer_a.lost)), "pool A's late outcome is refused")

    done = await store.get(job.id)
    assert (done.status, done.attempts, done.lease_token) == (Status.COMPLETED, 2, 2)
    assert ran_b == [2]
    assert [lost.lease_token for lost in observer_a.lost] == [1]
    assert observer_a.finished == []


async def test_stale_worker_cannot_overwrite_the_outcome_of_a_newer_claim(
    engine: AsyncEngine, database_url: str
) -> None:
    store = PostgresJobStore(engine)
    gate_a = asyncio.Event()
    gate_b = asyncio.Event()
    started_a: list[int] = []
    started_b: list[int] = []
    observer_a = RecordingObserver()

    registry_a = Registry()

    @registry_a.handler("charge")
    async def succeeds_late(ctx: JobContext, payload: Any) -> None:
        started_a.append(ctx.attempt)
        await gate_a.wait()

    registry_b = Registry()

    @registry_b.handler("charge")
    async def fails_for_good(ctx: JobContext, payload: Any) -> None:
        started_b.append(ctx.attempt)
        await gate_b.wait()
        raise Permanent("card declined")

    job = await submit(store, "charge")
    slow_a = replace(CONFIG, workers=1, lease_duration=SHORT_LEASE)
    async with pool_on_own_engine(database_url, registry_a, slow_a, observer_a, FrozenStore):
        await until(_holds(lambda: started_a == [1]), "pool A runs the job")
        await recover_when_expired(store, job.id)
        async with pool_on_own_engine(database_url, registry_b):
            await until(_holds(lambda: started_b == [2]), "pool B runs the job again")
            # A finishes while B holds the newer lease: A's "completed" must be refused.
            gate_a.set()
            await until(_holds(lambda: bool(observer_a.lost)), "pool A's outcome is refused")
            held = await store.get(job.id)
            assert (held.status, held.lease_token) == (Status.PROCESSING, 2)
            gate_b.set()
            await until(_status_is(store, job.id, Status.FAILED), "pool B's outcome lands")

    done = await store.get(job.id)
    assert (done.status, done.attempts) == (Status.FAILED, 2)
    assert done.last_error == "Permanent: card declined"


@pytest.mark.slow
async def test_job_that_kills_its_process_every_time_ends_in_dead_letter(
    engine: AsyncEngine, database_url: str
) -> None:
    store = PostgresJobStore(engine)
    job = await submit(store, "poison", max_attempts=3)

    for attempt in range(1, 4):
        exit_code = await _run_victim(database_url)
        assert exit_code == KILLED_BY_JOB
        killed = await store.get(job.id)
        assert (killed.status, killed.attempts) == (Status.PROCESSING, attempt)
        await recover_when_expired(store, job.id)

    dead = await store.get(job.id)
    assert (dead.status, dead.attempts) == (Status.DEAD_LETTER, 3)
    assert dead.last_error == LEASE_EXPIRED_ERROR


async def _run_victim(database_url: str) -> int:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.integration.worker_victim",
        database_url,
        str(SHORT_LEASE // timedelta(milliseconds=1)),
        cwd=PROJECT_ROOT,
    )
    try:
        return await asyncio.wait_for(process.wait(), DEADLINE_SECONDS)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def _holds(predicate: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return predicate()

    return check


def _status_is(
    store: PostgresJobStore, job_id: UUID, status: Status
) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return (await store.get(job_id)).status is status

    return check
