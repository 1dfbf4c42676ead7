"""A stale worker can never overwrite the outcome of a newer claim.

Attempt numbers repeat after a operator retry or a shutdown release, so only the lease
token, which grows at every claim, can tell the claims apart.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.errors import LeaseLost
from jobqueue.domain.job import Job, Lease
from jobqueue.domain.outcome import Decision
from jobqueue.domain.status import Status
from tests.fakes import TEST_TYPES
from tests.support.endings import record
from tests.support.job_rows import expire_lease, read_row, seed_job

LEASE = timedelta(minutes=5)

StaleWrite = Callable[[PostgresJobStore, Lease], Awaitable[Job]]

STALE_WRITES: list[StaleWrite] = [
    lambda store, lease: record(store, lease, Decision.complete()),
    lambda store, lease: record(store, lease, Decision.backoff(timedelta(0), "stale retry")),
    lambda store, lease: record(store, lease, Decision.fail("stale failure")),
    lambda store, lease: record(store, lease, Decision.dead_letter("stale dead letter")),
    lambda store, lease: record(store, lease, Decision.release()),
]
STALE_IDS = ["complete", "retry", "fail", "dead_letter", "release"]


async def _claim(store: PostgresJobStore) -> Job:
    [job] = await store.claim(1, LEASE, types=TEST_TYPES)
    return job


async def _assert_stale_write_is_dropped(
    store: PostgresJobStore, engine: AsyncEngine, stale: Lease, newer: Job, write: StaleWrite
) -> None:
    before = await read_row(engine, newer.id)
    with pytest.raises(LeaseLost):
        await write(store, stale)
    assert await read_row(engine, newer.id) == before
    # The newer claim still owns the job and its outcome lands.
    assert (await record(store, newer.lease, Decision.complete())).status == "completed"


@pytest.mark.parametrize("write", STALE_WRITES, ids=STALE_IDS)
async def test_stale_worker_cannot_overwrite_newer_claim_after_recovery(
    engine: AsyncEngine, write: StaleWrite
) -> None:
    store = PostgresJobStore(engine)
    await seed_job(engine, Status.PENDING, attempts=0, lease_token=0)
    first = await _claim(store)
    await expire_lease(engine, first.id)
    [recovered] = await store.recover_expired(10)
    assert recovered.status == "pending"
    second = await _claim(store)

    assert second.lease_token > first.lease_token
    await _assert_stale_write_is_dropped(store, engine, first.lease, second, write)


@pytest.mark.parametrize("write", STALE_WRITES, ids=STALE_IDS)
async def test_stale_worker_cannot_overwrite_newer_claim_after_manual_retry(
    engine: AsyncEngine, write: StaleWrite
) -> None:
    store = PostgresJobStore(engine)
    await seed_job(engine, Status.PENDING, attempts=0, max_attempts=1, lease_token=0)
    first = await _claim(store)
    await record(store, first.lease, Decision.dead_letter("gave up"))
    await store.retry(first.id)
    second = await _claim(store)

    # The reset repeats the attempt number: only the token tells the claims apart.
    assert second.attempts == first.attempts
    await _assert_stale_write_is_dropped(store, engine, first.lease, second, write)


@pytest.mark.parametrize("write", STALE_WRITES, ids=STALE_IDS)
async def test_stale_worker_cannot_overwrite_newer_claim_after_shutdown_release(
    engine: AsyncEngine, write: StaleWrite
) -> None:
    store = PostgresJobStore(engine)
    await seed_job(engine, Status.PENDING, attempts=0, lease_token=0)
    first = await _claim(store)
    await record(store, first.lease, Decision.release())
    second = await _claim(store)

    assert second.attempts == first.attempts
    await _assert_stale_write_is_dropped(store, engine, first.lease, second, write)


async def test_outcome_with_a_future_token_is_refused(engine: AsyncEngine) -> None:
    store = PostgresJobStore(engine)
    await seed_job(engine, Status.PENDING, attempts=0)
    job = await _claim(store)
    with pytest.raises(LeaseLost):
        await record(store, Lease(job.id, job.lease_token + 1), Decision.complete())
    assert (await store.get(job.id)).status == "processing"


async def test_a_finished_job_refuses_a_second_outcome(engine: AsyncEngine) -> None:
    store = PostgresJobStore(engine)
    await seed_job(engine, Status.PENDING, attempts=0)
    job = await _claim(store)
    done = await record(store, job.lease, Decision.complete())
    with pytest.raises(LeaseLost):
        await record(store, job.lease, Decision.fail("too late"))
    assert await store.get(job.id) == done
