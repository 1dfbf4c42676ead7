"""Lease recovery: jobs whose process died go back to pending, or to dead_letter."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.job import Job
from jobqueue.domain.outcome import LEASE_EXPIRED_ERROR
from jobqueue.domain.status import Status
from tests.fakes import TEST_TYPES
from tests.support.job_rows import database_now, expire_lease, read_row, seed_job


async def test_expired_lease_with_attempts_left_goes_back_to_pending(
    engine: AsyncEngine,
) -> None:
    store = PostgresJobStore(engine)
    job_id = await seed_job(engine, Status.PROCESSING, attempts=1, max_attempts=3)
    await expire_lease(engine, job_id)

    before = await database_now(engine)
    [recovered] = await store.recover_expired(10)
    after = await database_now(engine)

    assert recovered.id == job_id
    # The lost attempt still counts: it was counted when the job was claimed.
    assert (recovered.status, recovered.attempts, recovered.locked_until) == ("pending", 1, None)
    assert recovered.last_error == LEASE_EXPIRED_ERROR
    assert before <= recovered.run_at <= after
    assert await store.get(job_id) == recovered


async def test_expired_lease_on_the_last_attempt_is_dead_lettered(engine: AsyncEngine) -> None:
    store = PostgresJobStore(engine)
    job_id = await seed_job(engine, Status.PROCESSING, attempts=3, max_attempts=3)
    await expire_lease(engine, job_id)

    [recovered] = await store.recover_expired(10)

    assert (recovered.id, recovered.status, recovered.attempts) == (job_id, "dead_letter", 3)
    assert (recovered.locked_until, recovered.last_error) == (None, LEASE_EXPIRED_ERROR)
    assert await store.claim(10, timedelta(minutes=1), types=TEST_TYPES) == []


async def test_unexpired_leases_are_left_alone(engine: AsyncEngine) -> None:
    store = PostgresJobStore(engine)
    held = await seed_job(engine, Status.PROCESSING, lease=timedelta(minutes=10))
    expired = await seed_job(engine, Status.PROCESSING, lease=timedelta(seconds=-1))
    held_before = await read_row(engine, held)

    recovered = await store.recover_expired(10)

    assert [job.id for job in recovered] == [expired]
    assert await read_row(engine, held) == held_before


async def test_recovery_takes_at_most_its_limit_oldest_expiry_first(engine: AsyncEngine) -> None:
    store = PostgresJobStore(engine)
    ids = [
        await seed_job(engine, Status.PROCESSING, lease=timedelta(seconds=-seconds))
        for seconds in (10, 30, 20)
    ]

    first = await store.recover_expired(2)
    rest = await store.recover_expired(2)

    assert {job.id for job in first} == {ids[1], ids[2]}
    assert [job.id for job in rest] == [ids[0]]
    assert await store.recover_expired(2) == []


async def test_recovery_passes_over_a_row_its_worker_is_writing(engine: AsyncEngine) -> None:
    store = PostgresJobStore(engine)
    busy = await seed_job(engine, Status.PROCESSING, lease=timedelta(seconds=-1))
    async with engine.begin() as worker:
        await worker.execute(text("SELECT 1 FROM jobs WHERE id = :id FOR UPDATE"), {"id": busy})
        # Without SKIP LOCKED this would wait on the worker's lock until the timeout.
        recovered = await asyncio.wait_for(store.recover_expired(10), timeout=60)
    assert recovered == []
    assert [job.id for job in await store.recover_expired(10)] == [busy]


async def test_a_tiny_lease_runs_out_and_the_job_is_recovered_and_claimable(
    engine: AsyncEngine,
) -> None:
    store = PostgresJobStore(engine)
    await seed_job(engine, Status.PENDING, attempts=0, lease_token=0)
    [claimed] = await store.claim(1, timedelta(milliseconds=1), types=TEST_TYPES)

    recovered = await _poll_recovery(store)

    assert [job.id for job in recovered] == [claimed.id]
    [again] = await store.claim(1, timedelta(minutes=5), types=TEST_TYPES)
    assert (again.id, again.attempts, again.lease_token) == (claimed.id, 2, 2)


async def _poll_recovery(store: PostgresJobStore, deadline: float = 30) -> list[Job]:
    give_up = time.monotonic() + deadline
    while not (recovered := list(await store.recover_expired(10))):
        if time.monotonic() > give_up:
            pytest.fail("a 1 ms lease was never recovered")
        await asyncio.sleep(0.01)
    return recovered
