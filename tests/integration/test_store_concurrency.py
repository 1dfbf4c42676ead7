"""Concurrent claimers and concurrent duplicate submissions, over several engines.

Several engines stand for several processes: each has its own connection pool, so the
only thing the claimers share is PostgreSQL.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from uuid import UUID

import pytest
from sqlalchemy import insert, text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.schema import jobs
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.errors import IdempotencyConflict
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.ports import Submitted
from jobqueue.domain.status import Status
from tests.fakes import TEST_TYPES
from tests.support.job_rows import count_jobs, seed_many

ENGINES = 4
LEASE = timedelta(minutes=5)


@pytest.fixture
async def engines(engine: AsyncEngine, database_url: str) -> AsyncIterator[list[AsyncEngine]]:
    # `engine` is requested for its side effect: the jobs table is emptied first.
    made = [create_engine(database_url, pool_size=5) for _ in range(ENGINES)]
    yield made
    for each in made:
        await each.dispose()


async def test_concurrent_claimers_never_share_a_job_nor_exceed_their_limit(
    engine: AsyncEngine, engines: list[AsyncEngine]
) -> None:
    total, limit, claimers_per_engine = 300, 7, 3
    await seed_many(engine, total)
    start = asyncio.Event()

    async def claimer(store: PostgresJobStore) -> list[list[Job]]:
        await start.wait()
        batches: list[list[Job]] = []
        while batch := list(await store.claim(limit, LEASE, types=TEST_TYPES)):
            batches.append(batch)
        return batches

    tasks = [
        asyncio.create_task(claimer(PostgresJobStore(each)))
        for each in engines
        for _ in range(claimers_per_engine)
    ]
    start.set()
    batches = [batch for per_task in await asyncio.gather(*tasks) for batch in per_task]

    assert all(1 <= len(batch) <= limit for batch in batches)
    claimed = [job.id for batch in batches for job in batch]
    assert len(claimed) == len(set(claimed)) == total
    assert all(job.attempts == 1 and job.status == "processing" for b in batches for job in b)
    assert await count_jobs(engine, Status.PROCESSING) == total
    # Several claimers really took part, so the claims did race.
    assert sum(1 for per_task in tasks if per_task.result()) > 1


async def _waiting_on_locks(engine: AsyncEngine) -> int:
    async with engine.connect() as connection:
        waiting = await connection.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
        )
        return int(waiting.scalar_one())


async def _until_waiting(engine: AsyncEngine, count: int, deadline: float = 60) -> None:
    give_up = time.monotonic() + deadline
    while await _waiting_on_locks(engine) < count:
        if time.monotonic() > give_up:
            pytest.fail(f"{count} submissions never queued up behind the open insert")
        await asyncio.sleep(0.02)


async def test_concurrent_duplicate_submissions_create_exactly_one_job(
    engine: AsyncEngine, engines: list[AsyncEngine]
) -> None:
    duplicates = 20
    new = NewJob(type="charge", max_attempts=3, payload={"cents": 500}, idempotency_key="pay-1")
    stores = [PostgresJobStore(each) for each in engines]

    # An open, uncommitted insert of the same key holds every submission at the unique
    # index; rolling it back releases them all at once, so they really race each other.
    async with engine.connect() as blocker:
        transaction = await blocker.begin()
        await blocker.execute(
            insert(jobs).values(type="charge", max_attempts=3, idempotency_key="pay-1")
        )
        tasks = [
            asyncio.create_task(stores[n % len(stores)].submit(new)) for n in range(duplicates)
        ]
        await _until_waiting(engine, duplicates)
        await transaction.rollback()
    results: list[Submitted] = await asyncio.gather(*tasks)

    created = [result for result in results if not result.replayed]
    assert len(created) == 1
    assert {result.job.id for result in results} == {created[0].job.id}
    assert await count_jobs(engine) == 1


async def test_concurrent_submissions_with_one_key_and_different_requests_conflict(
    engine: AsyncEngine, engines: list[AsyncEngine]
) -> None:
    stores = [PostgresJobStore(each) for each in engines]
    requests = [
        NewJob(type="charge", max_attempts=3, payload={"cents": n % 2}, idempotency_key="k")
        for n in range(10)
    ]
    outcomes = await asyncio.gather(
        *(stores[n % len(stores)].submit(r) for n, r in enumerate(requests)),
        return_exceptions=True,
    )

    winners: set[UUID] = {o.job.id for o in outcomes if isinstance(o, Submitted)}
    [winner] = winners
    stored = [o for o in outcomes if isinstance(o, Submitted) and not o.replayed]
    assert len(stored) == 1
    winning_payload = stored[0].job.payload
    for request, outcome in zip(requests, outcomes, strict=True):
        if request.payload == winning_payload:
            assert isinstance(outcome, Submitted)
            assert outcome.job.id == winner
        else:
            assert isinstance(outcome, IdempotencyConflict)
    assert await count_jobs(engine) == 1
