"""Claims walk the due index by `(run_at, id)`, starting after the last job claimed
(`adapters.postgres.claim_cursor`), and still find what became due behind that point."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue import enqueue_many
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.job import NewJob
from jobqueue.domain.outcome import Decision
from tests.fakes import TEST_TYPES

LEASE = timedelta(minutes=5)


async def submitted(engine: AsyncEngine, count: int) -> list[NewJob]:
    # One transaction: every job has the same run_at, so only the id orders them.
    news = [NewJob(type="t", max_attempts=3, payload={"n": n}) for n in range(count)]
    async with engine.begin() as connection:
        await enqueue_many(connection, news)
    return news


async def test_full_claims_go_on_after_the_last_job_claimed_in_key_order(
    engine: AsyncEngine,
) -> None:
    await submitted(engine, 9)
    store = PostgresJobStore(engine)

    batches = [await store.claim(3, LEASE, types=TEST_TYPES) for _ in range(3)]

    keys = [(job.run_at, job.id) for batch in batches for job in batch]
    assert keys == sorted(keys)
    assert len(set(keys)) == 9
    assert await store.claim(3, LEASE, types=TEST_TYPES) == []


async def test_a_job_released_behind_the_cursor_is_claimed_by_the_next_short_claim(
    engine: AsyncEngine,
) -> None:
    await submitted(engine, 6)
    store = PostgresJobStore(engine)
    first = await store.claim(3, LEASE, types=TEST_TYPES)
    # Given back with its run_at unchanged: behind where the next claim starts.
    released = first[0]
    assert await store.record_many([(released.lease, Decision.release())]) == {released.lease}

    second = await store.claim(3, LEASE, types=TEST_TYPES)
    assert released.id not in {job.id for job in second}
    # Nothing is left after the cursor: the claim comes back short there, and the same
    # call looks from the start of the index, so the released job waits for no poll.
    (again,) = await store.claim(3, LEASE, types=TEST_TYPES)
    assert again.id == released.id
    assert again.attempts == 1


async def test_a_claim_carrying_endings_follows_the_same_cursor(engine: AsyncEngine) -> None:
    await submitted(engine, 4)
    store = PostgresJobStore(engine)
    first, second = await store.claim(2, LEASE, types=TEST_TYPES)

    held, claimed = await store.record_and_claim(
        [(first.lease, Decision.release()), (second.lease, Decision.complete())],
        2,
        LEASE,
        types=TEST_TYPES,
    )
    assert held == {first.lease, second.lease}
    assert {job.id for job in claimed}.isdisjoint({first.id, second.id})
    _, (again,) = await store.record_and_claim(
        [(job.lease, Decision.complete()) for job in claimed], 2, LEASE, types=TEST_TYPES
    )
    assert again.id == first.id
