"""A limited queue's claim, and its state as `GET /queues` reads it, under EXPLAIN ANALYZE
on a queue of 20,000 due jobs: each reads a number of `jobs` rows bounded by the limit
and the claim's size, never the queue's backlog."""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import timedelta

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.flow import QueueLimits, Rate
from jobqueue.domain.outcome import Decision
from tests.support.plans import capture_statements, rows_read

BACKLOG = 20_000
CLAIM = 10
TYPES = frozenset({"held"})


async def _seed(engine: AsyncEngine) -> None:
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO jobs (type, queue, max_attempts)"
                " SELECT 'held', 'limited', 3 FROM generate_series(1, :rows)"
            ),
            {"rows": BACKLOG},
        )
        await connection.execute(text("ANALYZE jobs"))


async def _read(engine: AsyncEngine, call: Awaitable[object], marker: str = "jobs") -> int:
    """The rows of `jobs` read by the one statement `call` sent that holds `marker`."""
    with capture_statements(engine) as sent:
        await call
    [(statement, parameters)] = [(s, p) for s, p in sent if marker in s]
    return (await rows_read(engine, statement, parameters)).rows


async def test_a_limited_claim_reads_what_its_limit_and_size_allow(engine: AsyncEngine) -> None:
    await _seed(engine)
    store = PostgresJobStore(engine)
    await store.set_queue_limits(
        "limited", QueueLimits(concurrency=8, rate=Rate(1_000, timedelta(minutes=1)))
    )
    lease = timedelta(minutes=5)
    # 8 running: the next claim takes nothing, reading the slots (the running jobs and the
    # holders the queue's row lists), not the backlog.
    running = await store.claim(CLAIM, lease, "limited", types=TYPES)
    assert len(running) == 8
    at_limit = await _read(engine, store.claim(CLAIM, lease, "limited", types=TYPES))
    assert at_limit <= 3 * 8, at_limit

    # Their endings free their slots for the claim that carries them.
    endings = [(job.lease, Decision.complete()) for job in running]
    freed = await _read(
        engine, store.record_and_claim(endings, CLAIM, lease, "limited", types=TYPES)
    )
    assert freed <= 3 * 8 + 2 * len(endings) + CLAIM, freed

    # The queue's state with its limits' use.
    state = await _read(engine, store.queue_summary("limited"), "FROM queues")
    assert state <= 8, state
