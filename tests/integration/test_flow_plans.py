"""A limited queue's claim, and its state as `GET /queues` reads it, under EXPLAIN ANALYZE
on a queue of 20,000 due jobs: each reads a number of `jobs` rows bounded by the limit
and the claim's size, never the queue's backlog."""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.queries.keys import KEYS_VISITED, SWEEP_PROBE
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.flow import QueueLimits, Rate, type_rates
from jobqueue.domain.outcome import Decision
from tests.support.plans import capture_statements, rows_read

BACKLOG = 20_000
CLAIM = 10
TYPES = frozenset({"held"})


async def _seed(
    engine: AsyncEngine,
    queue: str,
    rows: int,
    key: str = "NULL",
    *,
    analyze: bool = True,
    job_type: str = "held",
) -> None:
    """`rows` due jobs of `job_type` in `queue`, each with the partition key `key` makes
    of its number `n` (an SQL expression), then statistics taken unless told not to."""
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO jobs (type, queue, max_attempts, partition_key)"
                f" SELECT :type, :queue, 3, {key} FROM generate_series(1, :rows) AS n"
            ),
            {"queue": queue, "rows": rows, "type": job_type},
        )
        if analyze:
            await connection.execute(text("ANALYZE jobs"))


async def _read(engine: AsyncEngine, call: Awaitable[object], marker: str = "jobs") -> int:
    """The rows of `jobs` read by the last statement `call` sent that holds `marker` (a
    claim that found the queue's limits changed claims again at once)."""
    with capture_statements(engine) as sent:
        await call
    statement, parameters = [(s, p) for s, p in sent if marker in s][-1]
    return (await rows_read(engine, statement, parameters)).rows


async def test_a_limited_claim_reads_what_its_limit_and_size_allow(engine: AsyncEngine) -> None:
    await _seed(engine, "limited", BACKLOG)
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


async def test_a_claim_reads_none_of_a_spent_type_s_backlog(engine: AsyncEngine) -> None:
    """A rated type with 20,000 due jobs and another type beside it, in one queue: once
    the rated type's window is spent, a claim reads the other type's jobs, not the
    rated one's backlog; with the window open, no more of its jobs than it has left."""
    await _seed(engine, "typed", BACKLOG)
    await _seed(engine, "typed", 5 * CLAIM, job_type="other")
    store = PostgresJobStore(engine)
    rated = type_rates({"held": Rate(CLAIM // 2, timedelta(hours=1))})
    await store.set_queue_limits("typed", QueueLimits(concurrency=1_000, type_rates=rated))
    lease = timedelta(minutes=5)
    both = {"held", "other"}

    first = await _read(engine, store.claim(CLAIM, lease, "typed", types=both))
    assert first <= 3 * CLAIM, first
    spent = await _read(engine, store.claim(CLAIM, lease, "typed", types=both))
    assert spent <= 3 * CLAIM, spent
    # And it takes the other type's jobs, as many as it asks for.
    more = await store.claim(CLAIM, lease, "typed", types=both)
    assert [job.type for job in more] == ["other"] * CLAIM
    # The state counts the running jobs (for the concurrency limit), not the backlog.
    state = await _read(engine, store.queue_summary("typed"), "FROM queues")
    assert state <= 3 * CLAIM, state


KEYS = 200


@pytest.mark.parametrize(
    "limits",
    [
        QueueLimits(key_concurrency=2),
        QueueLimits(concurrency=10_000, key_concurrency=2),
        QueueLimits(key_rate=Rate(2, timedelta(hours=1))),
        QueueLimits(rate=Rate(10_000, timedelta(hours=1)), key_rate=Rate(2, timedelta(hours=1))),
    ],
    ids=str,
)
async def test_a_claim_with_a_per_key_limit_reads_the_keys_it_visits_not_their_backlogs(
    engine: AsyncEngine, limits: QueueLimits
) -> None:
    """One key's flood of 20,000 jobs and 200 keys of 5 each, at most 2 running (or
    started within the hour) per key:
    a claim visits a bounded number of keys (one index descent each), locks no more of a
    key's jobs than its free slots, and sweeps a bounded number of due jobs for jobs
    without a key; the flood's size never shows, even with the statistics of an empty
    table, as after a deployment's first ANALYZE."""
    async with engine.begin() as connection:
        await connection.execute(text("DELETE FROM jobs"))
        await connection.execute(text("DELETE FROM key_starts"))
        await connection.execute(text("ANALYZE jobs"))
    await _seed(engine, "keyed", BACKLOG, "'a'", analyze=False)
    await _seed(engine, "keyed", 5 * KEYS, f"'k' || (n % {KEYS})", analyze=False)
    store = PostgresJobStore(engine)
    await store.set_queue_limits("keyed", limits)
    lease = timedelta(minutes=5)
    visited = KEYS_VISITED
    bound = 3 * visited + 2 * CLAIM + SWEEP_PROBE

    first = await _read(engine, store.claim(CLAIM, lease, "keyed", types=TYPES))
    assert first <= bound, first
    # Round after round, the flood's key at its limit and the rest rotating.
    for _ in range(KEYS // CLAIM):
        claimed = await store.claim(CLAIM, lease, "keyed", types=TYPES)
        assert len(claimed) == CLAIM
    later = await _read(engine, store.claim(CLAIM, lease, "keyed", types=TYPES))
    assert later <= bound + 2 * visited, later


@pytest.mark.parametrize(
    "limits",
    [QueueLimits(key_concurrency=2), QueueLimits(key_rate=Rate(2, timedelta(hours=1)))],
    ids=str,
)
async def test_a_claim_takes_the_turns_of_the_keys_it_takes_from_and_no_more(
    engine: AsyncEngine, limits: QueueLimits
) -> None:
    """Each key visited is a turn held to the claim's commit (an advisory lock), which
    other claims pass over: a claim that got all it asked for from the first keys must
    not have visited the rest, nor one that reports what held it back."""
    keys = 30
    await _seed(engine, "keyed", 2 * keys, f"'k' || lpad(CAST(n % {keys} AS text), 2, '0')")
    store = PostgresJobStore(engine)
    await store.set_queue_limits("keyed", limits)
    lease = timedelta(minutes=5)
    await store.claim(CLAIM, lease, "keyed", types=TYPES)  # the statement chosen
    with capture_statements(engine) as sent:
        await store.claim(CLAIM, lease, "keyed", types=TYPES)
    statement, parameters = [(s, p) for s, p in sent if "jobqueue_key_turn" in s][-1]
    async with engine.connect() as connection:
        claimed = (await connection.exec_driver_sql(statement, tuple(parameters))).all()
        turns = await connection.scalar(
            text(
                "SELECT count(*) FROM pg_locks"
                " WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
            )
        )
        await connection.rollback()
    assert len(claimed) == CLAIM
    assert turns == CLAIM // 2
