"""Each store operation on its own: what it writes, and what it refuses."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any
from uuid import uuid4

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue import enqueue
from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.errors import (
    IdempotencyConflict,
    InvalidJob,
    JobNotFound,
    StoreUnavailable,
)
from jobqueue.domain.fields import JsonValue
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.outcome import Decision
from jobqueue.domain.ports import JobStore
from jobqueue.domain.status import Status
from tests.fakes import TEST_TYPES
from tests.support.endings import record
from tests.support.job_rows import SEEDED_TOKEN, count_jobs, database_now, seed_job
from tests.support.postgres import with_database

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
LEASE = timedelta(minutes=5)


def new_job(
    payload: JsonValue = None,
    *,
    job_type: str = "email",
    max_attempts: int = 3,
    key: str | None = None,
) -> NewJob:
    return NewJob(
        type=job_type,
        max_attempts=max_attempts,
        payload={"to": "a@example.com"} if payload is None else payload,
        idempotency_key=key,
        traceparent=TRACEPARENT,
    )


@pytest.fixture
def store(engine: AsyncEngine) -> JobStore:
    return PostgresJobStore(engine)


# --- submit ---------------------------------------------------------------------------


async def test_submit_creates_a_pending_job_due_now(store: JobStore, engine: AsyncEngine) -> None:
    before = await database_now(engine)
    submitted = await store.submit(new_job(key="order-1"))
    after = await database_now(engine)

    job = submitted.job
    assert not submitted.replayed
    assert (job.type, job.status, job.attempts, job.max_attempts) == ("email", "pending", 0, 3)
    assert (job.lease_token, job.locked_until, job.last_error) == (0, None, None)
    assert (job.idempotency_key, job.traceparent) == ("order-1", TRACEPARENT)
    assert before <= job.run_at <= after
    assert await store.get(job.id) == job


@pytest.mark.parametrize(
    "payload",
    [
        {"nested": {"list": [1, 2.5, "three", None, True, False], "empty": {}}},
        [1, "two", {"three": 3}],
        "just a string",
        0.1,
        2**70,
        1.0,
        None,
        {"unicode": "zürich ✓ 東京", "quote": "\"'\\", "big": -(2**63)},
    ],
    ids=repr,
)
async def test_payload_round_trips_as_the_same_json_value(
    store: JobStore, payload: JsonValue
) -> None:
    job = NewJob(type="echo", max_attempts=1, payload=payload)
    submitted = await store.submit(job)
    fetched = await store.get(submitted.job.id)
    assert submitted.job.payload == payload
    assert fetched.payload == payload
    assert type(fetched.payload) is type(payload)


async def test_same_key_and_same_request_replays_the_existing_job(store: JobStore) -> None:
    first = await store.submit(new_job({"a": 1, "b": [1, {"c": 2}]}, key="k"))
    # Another key order is the same jsonb value, so the same request.
    again = await store.submit(new_job({"b": [1, {"c": 2}], "a": 1}, key="k"))

    assert not first.replayed
    assert again.replayed
    assert again.job == first.job


@pytest.mark.parametrize(
    "different",
    [
        new_job(job_type="sms", key="k"),
        new_job({"to": "b@example.com"}, key="k"),
        new_job(max_attempts=4, key="k"),
    ],
    ids=["type", "payload", "max_attempts"],
)
async def test_same_key_with_a_different_request_is_a_conflict(
    store: JobStore, engine: AsyncEngine, different: NewJob
) -> None:
    await store.submit(new_job(key="k"))
    with pytest.raises(IdempotencyConflict) as raised:
        await store.submit(different)
    assert raised.value.key == "k"
    assert await count_jobs(engine) == 1


async def test_submissions_without_a_key_are_never_replayed(
    store: JobStore, engine: AsyncEngine
) -> None:
    first = await store.submit(new_job())
    second = await store.submit(new_job())
    assert not first.replayed
    assert not second.replayed
    assert first.job.id != second.job.id
    assert await count_jobs(engine) == 2


@pytest.mark.parametrize(
    "refused",
    [
        NewJob(type="echo", max_attempts=1, payload={"text": "nul \u0000 inside"}),
        NewJob(type="ec\x00ho", max_attempts=1),
        NewJob(type="echo", max_attempts=1, idempotency_key="k\x00"),
        NewJob(type="echo", max_attempts=0),
    ],
    ids=["nul-in-payload", "nul-in-type", "nul-in-key", "max-attempts-out-of-range"],
)
async def test_value_postgres_cannot_store_is_an_invalid_job(
    store: JobStore, engine: AsyncEngine, refused: NewJob
) -> None:
    with pytest.raises(InvalidJob, match="refused"):
        await store.submit(refused)
    assert await count_jobs(engine) == 0


# --- enqueue: the caller's transaction (the public in-process API) -------------------------


async def test_job_submitted_in_a_rolled_back_transaction_does_not_exist(
    engine: AsyncEngine,
) -> None:
    async with engine.connect() as connection:
        transaction = await connection.begin()
        submitted = await enqueue(connection, new_job())
        await transaction.rollback()

    with pytest.raises(JobNotFound):
        await PostgresJobStore(engine).get(submitted.job.id)
    assert await count_jobs(engine) == 0


async def test_job_submitted_in_a_transaction_is_claimable_only_once_it_commits(
    engine: AsyncEngine,
) -> None:
    store = PostgresJobStore(engine)
    async with engine.begin() as connection:
        await connection.execute(text("CREATE TEMP TABLE orders (id int) ON COMMIT DROP"))
        await connection.execute(text("INSERT INTO orders VALUES (1)"))
        submitted = await enqueue(connection, new_job())
        assert await store.claim(10, LEASE, types=TEST_TYPES) == []

    claimed = await store.claim(10, LEASE, types=TEST_TYPES)
    assert [job.id for job in claimed] == [submitted.job.id]


async def test_idempotency_holds_inside_a_callers_transaction(engine: AsyncEngine) -> None:
    async with engine.begin() as connection:
        first = await enqueue(connection, new_job(key="k"))
        again = await enqueue(connection, new_job(key="k"))
        with pytest.raises(IdempotencyConflict):
            await enqueue(connection, new_job({"other": True}, key="k"))
    assert again.replayed
    assert again.job.id == first.job.id


# --- get --------------------------------------------------------------------------------


async def test_get_of_an_unknown_id_is_not_found(store: JobStore) -> None:
    missing = uuid4()
    with pytest.raises(JobNotFound) as raised:
        await store.get(missing)
    assert raised.value.job_id == missing


# --- claim ------------------------------------------------------------------------------


async def test_claim_takes_due_jobs_oldest_first_up_to_the_limit(
    store: JobStore, engine: AsyncEngine
) -> None:
    newest = await seed_job(engine, Status.PENDING, attempts=0, run_in=timedelta(seconds=-10))
    oldest = await seed_job(engine, Status.PENDING, attempts=0, run_in=timedelta(seconds=-30))
    middle = await seed_job(engine, Status.PENDING, attempts=0, run_in=timedelta(seconds=-20))

    before = await database_now(engine)
    claimed = await store.claim(2, LEASE, types=TEST_TYPES)
    after = await database_now(engine)

    assert [job.id for job in claimed] == [oldest, middle]
    for job in claimed:
        assert (job.status, job.attempts, job.lease_token) == ("processing", 1, SEEDED_TOKEN + 1)
        assert job.locked_until is not None
        assert before + LEASE <= job.locked_until <= after + LEASE
    assert [job.id for job in await store.claim(2, LEASE, types=TEST_TYPES)] == [newest]


async def test_claim_leaves_jobs_that_are_not_due_yet(store: JobStore, engine: AsyncEngine) -> None:
    await seed_job(engine, Status.PENDING, attempts=0, run_in=timedelta(minutes=1))
    assert await store.claim(10, LEASE, types=TEST_TYPES) == []


async def test_claim_passes_over_rows_locked_by_another_transaction(
    store: JobStore, engine: AsyncEngine
) -> None:
    locked = await seed_job(engine, Status.PENDING, attempts=0, run_in=timedelta(seconds=-2))
    free = await seed_job(engine, Status.PENDING, attempts=0, run_in=timedelta(seconds=-1))
    async with engine.begin() as connection:
        await connection.execute(
            text("SELECT 1 FROM jobs WHERE id = :id FOR UPDATE"), {"id": locked}
        )
        # Would wait for the lock (and hit the timeout) without SKIP LOCKED.
        claimed = await asyncio.wait_for(store.claim(10, LEASE, types=TEST_TYPES), timeout=60)
    assert [job.id for job in claimed] == [free]


@pytest.mark.parametrize(("limit", "lease"), [(0, LEASE), (1, timedelta(0))])
async def test_claim_refuses_a_limit_or_lease_that_cannot_claim(
    store: JobStore, limit: int, lease: timedelta
) -> None:
    with pytest.raises(ValueError, match="must"):
        await store.claim(limit, lease, types=TEST_TYPES)


# --- outcome writes ---------------------------------------------------------------------


async def test_retry_due_time_is_computed_by_the_database_clock(
    store: JobStore, engine: AsyncEngine
) -> None:
    job = await _claim_one(store, engine)
    delay = timedelta(hours=2)

    before = await database_now(engine)
    retried = await record(store, job.lease, Decision.backoff(delay, "connection reset"))
    after = await database_now(engine)

    assert (retried.status, retried.attempts, retried.locked_until) == ("pending", 1, None)
    assert retried.last_error == "connection reset"
    assert before + delay <= retried.run_at <= after + delay
    assert await store.claim(1, LEASE, types=TEST_TYPES) == []


async def test_release_gives_the_attempt_back_and_is_due_at_once(
    store: JobStore, engine: AsyncEngine
) -> None:
    job = await _claim_one(store, engine)
    before = await database_now(engine)
    released = await record(store, job.lease, Decision.release())
    after = await database_now(engine)

    assert (released.status, released.attempts, released.locked_until) == ("pending", 0, None)
    assert before <= released.run_at <= after
    assert released.lease_token == job.lease_token
    [again] = await store.claim(1, LEASE, types=TEST_TYPES)
    assert (again.id, again.attempts, again.lease_token) == (job.id, 1, job.lease_token + 1)


@pytest.mark.parametrize(
    ("write", "status", "error"),
    [
        (lambda s, lease: record(s, lease, Decision.complete()), "completed", None),
        (lambda s, lease: record(s, lease, Decision.fail("bad input")), "failed", "bad input"),
        (
            lambda s, lease: record(s, lease, Decision.dead_letter("gave up")),
            "dead_letter",
            "gave up",
        ),
    ],
    ids=["complete", "fail", "dead_letter"],
)
async def test_finishing_ends_the_lease_and_records_the_error(
    store: JobStore,
    engine: AsyncEngine,
    write: Callable[[JobStore, Any], Awaitable[Any]],
    status: str,
    error: str | None,
) -> None:
    job = await _claim_one(store, engine)
    finished = await write(store, job.lease)
    assert (finished.status, finished.locked_until, finished.last_error) == (status, None, error)
    assert (finished.attempts, finished.lease_token) == (job.attempts, job.lease_token)
    assert finished.updated_at >= job.updated_at
    assert await store.get(job.id) == finished


async def test_retry_refuses_a_negative_delay(store: JobStore, engine: AsyncEngine) -> None:
    job = await _claim_one(store, engine)
    with pytest.raises(ValueError, match="negative"):
        await record(store, job.lease, Decision.backoff(timedelta(seconds=-1), "boom"))
    assert await store.get(job.id) == job


# --- operator retry -----------------------------------------------------------------------


async def test_operator_retry_restores_the_attempt_budget_but_not_the_lease_token(
    store: JobStore, engine: AsyncEngine
) -> None:
    job_id = await seed_job(engine, Status.DEAD_LETTER, attempts=3, lease_token=5)
    before = await database_now(engine)
    retried = await store.retry(job_id)
    after = await database_now(engine)

    assert (retried.status, retried.attempts, retried.lease_token) == ("pending", 0, 5)
    assert before <= retried.run_at <= after
    [claimed] = await store.claim(1, LEASE, types=TEST_TYPES)
    assert (claimed.attempts, claimed.lease_token) == (1, 6)


# --- availability -----------------------------------------------------------------------


async def test_ping_answers_when_the_database_does(store: JobStore) -> None:
    await store.ping()


def _closed_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.ping(),
        lambda s: s.get(uuid4()),
        lambda s: s.submit(new_job()),
        lambda s: s.claim(1, LEASE, types=TEST_TYPES),
        lambda s: s.recover_expired(1),
        lambda s: s.retry(uuid4()),
    ],
    ids=["ping", "get", "submit", "claim", "recover_expired", "retry"],
)
async def test_unreachable_database_is_store_unavailable(
    call: Callable[[JobStore], Awaitable[object]],
) -> None:
    engine = create_engine(f"postgresql://postgres@127.0.0.1:{_closed_loopback_port()}/none")
    try:
        with pytest.raises(StoreUnavailable, match="failed"):
            await call(PostgresJobStore(engine))
    finally:
        await engine.dispose()


async def test_driver_error_is_store_unavailable(database_url: str) -> None:
    engine = create_engine(with_database(database_url, "no_such_database"))
    try:
        with pytest.raises(StoreUnavailable, match="does not exist"):
            await PostgresJobStore(engine).ping()
    finally:
        await engine.dispose()


async def _claim_one(store: JobStore, engine: AsyncEngine) -> Job:
    await seed_job(engine, Status.PENDING, attempts=0)
    [job] = await store.claim(1, LEASE, types=TEST_TYPES)
    return job
