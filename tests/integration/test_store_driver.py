"""The store's statements, sent by asyncpg itself (`adapters.postgres.driver`): what they
return matches what SQLAlchemy reads, and a failure leaves no broken connection in the
pool."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from jobqueue.adapters.postgres.driver import driver_of, fetch_pooled
from jobqueue.adapters.postgres.statement import Statement
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.fields import JsonValue
from jobqueue.domain.job import NewJob
from jobqueue.domain.outcome import Decision
from tests.fakes import TEST_TYPES

LEASE = timedelta(minutes=5)


async def test_claimed_jobs_equal_the_same_rows_read_through_sqlalchemy(
    engine: AsyncEngine,
) -> None:
    store = PostgresJobStore(engine)
    payload: JsonValue = {"to": "a@example.com", "n": [1, 2.5, None, True], "nested": {"é": "ü"}}
    await store.submit(
        NewJob(
            type="email",
            max_attempts=3,
            payload=payload,
            idempotency_key="k-1",
            traceparent="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )
    )

    [claimed] = await store.claim(1, LEASE, types=TEST_TYPES)

    assert claimed == await store.get(claimed.id)
    assert claimed.payload == payload


async def test_batched_writes_answer_with_the_leases_they_held(engine: AsyncEngine) -> None:
    store = PostgresJobStore(engine)
    for _ in range(3):
        await store.submit(NewJob(type="email", max_attempts=3))
    first, second, third = await store.claim(3, LEASE, types=TEST_TYPES)
    stale = type(third.lease)(third.id, third.lease_token - 1)

    assert await store.renew([first.lease, stale], LEASE) == {first.lease}
    recorded = await store.record_many(
        [
            (first.lease, Decision.complete()),
            (second.lease, Decision.release()),
            (stale, Decision.complete()),
        ]
    )
    assert recorded == {first.lease, second.lease}


async def test_endings_and_the_next_claim_go_in_one_statement(engine: AsyncEngine) -> None:
    store = PostgresJobStore(engine)
    for n in range(4):
        await store.submit(NewJob(type="email", max_attempts=3, payload={"n": n}))
    first, second = await store.claim(2, LEASE, types=TEST_TYPES)
    stale = type(first.lease)(first.id, first.lease_token - 1)

    held, claimed = await store.record_and_claim(
        [
            (first.lease, Decision.complete()),
            (second.lease, Decision.release()),
            (stale, Decision.complete()),
        ],
        2,
        LEASE,
        types=TEST_TYPES,
    )

    assert held == {first.lease, second.lease}
    # The two still pending, and not the one released by the same statement: both parts
    # see the table as it was before it.
    assert sorted(str(job.payload) for job in claimed) == ["{'n': 2}", "{'n': 3}"]
    for job in claimed:
        assert job == await store.get(job.id)
    assert (await store.get(first.id)).status.value == "completed"
    # Released, it is claimable by the next call; a claim finding nothing still answers
    # for its endings.
    held, [again] = await store.record_and_claim(
        [(claimed[0].lease, Decision.complete())], 2, LEASE, types=TEST_TYPES
    )
    assert (held, again.id) == ({claimed[0].lease}, second.id)
    held, none = await store.record_and_claim(
        [(again.lease, Decision.complete())], 2, LEASE, types=TEST_TYPES
    )
    assert (held, list(none)) == ({again.lease}, [])


async def test_a_statement_reads_the_same_sent_by_either_way(engine: AsyncEngine) -> None:
    # Its named parameters numbered for the driver, one number per name however often it
    # appears; a `::` cast is no parameter; SQLAlchemy binds the same text the same way.
    statement = Statement(
        "probe",
        "SELECT CAST(:n AS integer) * CAST(:n AS integer) AS square,"
        " '7'::int AS cast, :word AS word",
    )
    assert statement.parameters == ("n", "word")
    assert "$2" in statement.numbered
    assert "$3" not in statement.numbered
    values = {"n": 6, "word": "six"}
    async with engine.connect() as connection:
        through_sqlalchemy = (await connection.execute(statement.clause, values)).one()
    (on_the_driver,) = await fetch_pooled(engine, statement, values)
    assert tuple(through_sqlalchemy) == tuple(on_the_driver) == (36, 7, "six")


def test_a_missing_value_is_refused_before_anything_is_sent() -> None:
    statement = Statement("wants", "SELECT CAST(:wanted AS integer)")
    with pytest.raises(TypeError, match="wanted"):
        statement.arguments({})


async def test_a_connection_whose_statement_failed_is_not_handed_out_again(
    engine: AsyncEngine,
) -> None:
    sleeping = Statement("sleep", "SELECT pg_sleep(CAST(:seconds AS float8))")

    async def sleep_on(connection: AsyncConnection) -> None:
        async with driver_of(connection) as driver:
            await driver.fetch(sleeping.numbered, *sleeping.arguments({"seconds": 30.0}))

    async with engine.connect() as victim, engine.connect() as other:
        backend = (await victim.execute(text("SELECT pg_backend_pid()"))).scalar_one()
        await victim.commit()
        running = asyncio.create_task(sleep_on(victim))
        await asyncio.sleep(0.2)
        await other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": backend})
        with pytest.raises((asyncpg.PostgresError, asyncpg.InterfaceError, OSError)):
            await running
        # Invalidated: closed, not returned to the pool with a broken socket.
        assert victim.invalidated

    # Every pooled connection still works.
    store = PostgresJobStore(engine)
    for _ in range(3):
        await store.ping()
