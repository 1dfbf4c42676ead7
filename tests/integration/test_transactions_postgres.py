"""`ctx.transaction()` against a real PostgreSQL: a handler's writes commit with its job's
completion, once; a lease taken away before the handler returns, an exception in or
after the block, and a failure roll them back, so that a retried job writes them once."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.payloads import MsgspecPayloadDecoder
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.adapters.postgres.transactions import PostgresTransactions
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.status import Status
from jobqueue.entrypoints.worker.pool import WorkerPool
from tests.unit.pool_harness import config, running

_LEDGER = "CREATE TABLE IF NOT EXISTS ledger (job_id uuid NOT NULL, attempt int NOT NULL)"
_WRITE = text("INSERT INTO ledger (job_id, attempt) VALUES (:job_id, :attempt)")


@pytest.fixture
async def ledger(engine: AsyncEngine) -> AsyncEngine:
    async with engine.begin() as connection:
        await connection.execute(text(_LEDGER))
        await connection.execute(text("TRUNCATE ledger"))
    return engine


async def _entries(engine: AsyncEngine, job_id: UUID) -> list[int]:
    async with engine.connect() as connection:
        rows = await connection.execute(
            text("SELECT attempt FROM ledger WHERE job_id = :id ORDER BY attempt"), {"id": job_id}
        )
        return [attempt for (attempt,) in rows]


def _pool(engine: AsyncEngine, registry: Registry, **changes: Any) -> WorkerPool:
    return WorkerPool(
        PostgresJobStore(engine),
        registry,
        MsgspecPayloadDecoder(),
        config(**changes),
        transactions=PostgresTransactions(engine),
    )


async def _submit(engine: AsyncEngine, job_type: str, max_attempts: int = 3) -> Job:
    store = PostgresJobStore(engine)
    return (await store.submit(NewJob.build(type=job_type, max_attempts=max_attempts))).job


async def _settled(engine: AsyncEngine, job: Job, *statuses: Status) -> Job:
    store = PostgresJobStore(engine)
    deadline = asyncio.get_running_loop().time() + 20
    while (current := await store.get(job.id)).status not in statuses:
        assert asyncio.get_running_loop().time() < deadline, f"still {current.status}"
        await asyncio.sleep(0.02)
    return current


async def test_writes_commit_once_with_the_completion(ledger: AsyncEngine) -> None:
    registry = Registry()

    @registry.handler("book")
    async def book(ctx: JobContext, payload: Any) -> dict[str, int]:
        async with ctx.transaction() as connection:
            await connection.execute(_WRITE, {"job_id": ctx.job_id, "attempt": ctx.attempt})
        return {"booked": 1}

    job = await _submit(ledger, "book")
    async with running(_pool(ledger, registry)):
        done = await _settled(ledger, job, Status.COMPLETED)

    assert done.result == {"booked": 1}
    assert await _entries(ledger, job.id) == [1]


async def test_a_lease_taken_away_before_the_return_commits_nothing(ledger: AsyncEngine) -> None:
    registry = Registry()
    written, go_on = asyncio.Event(), asyncio.Event()

    @registry.handler("book")
    async def book(ctx: JobContext, payload: Any) -> None:
        async with ctx.transaction() as connection:
            await connection.execute(_WRITE, {"job_id": ctx.job_id, "attempt": ctx.attempt})
        written.set()
        await go_on.wait()

    job = await _submit(ledger, "book", max_attempts=1)
    store = PostgresJobStore(ledger)
    async with running(_pool(ledger, registry)):
        await asyncio.wait_for(written.wait(), 20)
        # Its process presumed dead: the lease runs out, recovery takes the job (its
        # last attempt: dead-lettered), and the handler, unaware, goes on to return.
        async with ledger.begin() as connection:
            await connection.execute(
                text("UPDATE jobs SET locked_until = now() - interval '1s' WHERE id = :id"),
                {"id": job.id},
            )
        assert [each.id for each in await store.recover_expired(10)] == [job.id]
        go_on.set()
        ended = await _settled(ledger, job, Status.DEAD_LETTER)

    assert ended.status is Status.DEAD_LETTER
    assert await _entries(ledger, job.id) == []


@pytest.mark.parametrize("where", ["in the block", "after the block"])
async def test_an_exception_rolls_back_and_the_retry_writes_once(
    ledger: AsyncEngine, where: str
) -> None:
    registry = Registry()

    @registry.handler("book")
    async def book(ctx: JobContext, payload: Any) -> None:
        async with ctx.transaction() as connection:
            await connection.execute(_WRITE, {"job_id": ctx.job_id, "attempt": ctx.attempt})
            if ctx.attempt == 1 and where == "in the block":
                raise ConnectionError("the payment provider hung up")
        if ctx.attempt == 1 and where == "after the block":
            raise ConnectionError("the mail server hung up")

    job = await _submit(ledger, "book")
    async with running(_pool(ledger, registry)):
        done = await _settled(ledger, job, Status.COMPLETED)

    assert done.attempts == 2
    assert await _entries(ledger, job.id) == [2]


async def test_a_second_transaction_in_one_attempt_is_refused(ledger: AsyncEngine) -> None:
    registry = Registry()

    @registry.handler("twice")
    async def twice(ctx: JobContext, payload: Any) -> None:
        async with ctx.transaction() as connection:
            await connection.execute(_WRITE, {"job_id": ctx.job_id, "attempt": 1})
        async with ctx.transaction():
            pass

    job = await _submit(ledger, "twice", max_attempts=1)
    async with running(_pool(ledger, registry)):
        failed = await _settled(ledger, job, Status.DEAD_LETTER)

    assert failed.last_error is not None
    assert "entered once per attempt" in failed.last_error
    assert await _entries(ledger, job.id) == []
