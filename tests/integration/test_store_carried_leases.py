"""A claim carrying endings answers which of them held their lease once, on one row,
whatever the queue's limits: on every row, a claim of n jobs carrying m endings sent and
decoded n × m ids (bench/RESULTS.md, "Endings' leases returned once")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any
from uuid import uuid4

import asyncpg
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.statement import Statement
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.flow import QueueLimits, Rate, type_rates
from jobqueue.domain.job import Job, Lease, NewJob
from jobqueue.domain.outcome import Decision
from tests.fakes import TEST_TYPES

LEASE = timedelta(minutes=5)
HOUR = timedelta(hours=1)

# Each kind of queue, and the statement its claims carrying endings use once the store
# knows its limits (its first claim tells it).
KINDS: dict[str, tuple[QueueLimits, str]] = {
    "plain": (QueueLimits(), "record_endings_and_claim"),
    "limited": (QueueLimits(concurrency=50), "record_endings_and_limited_claim"),
    "typed": (
        QueueLimits(type_rates=type_rates({"email": Rate(1000, HOUR)})),
        "record_endings_and_typed_claim",
    ),
    "keyed": (QueueLimits(key_concurrency=5), "record_endings_and_keyed_claim"),
    "limited-keyed": (
        QueueLimits(concurrency=50, key_concurrency=5),
        "record_endings_and_limited_keyed_claim",
    ),
}


class AnsweringStore(PostgresJobStore):
    """The store, keeping the rows each statement answered, by the statement's name."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.answers: list[tuple[str, Sequence[asyncpg.Record]]] = []
        super().__init__(engine)

    async def _fetch(
        self, statement: Statement, values: Mapping[str, Any]
    ) -> Sequence[asyncpg.Record]:
        rows = await super()._fetch(statement, values)
        self.answers.append((statement.name, rows))
        return rows


@pytest.mark.parametrize("kind", KINDS)
async def test_the_leases_held_come_back_once_on_one_row(engine: AsyncEngine, kind: str) -> None:
    limits, statement = KINDS[kind]
    queue = f"carried-{kind}"
    store = AnsweringStore(engine)
    await store.set_queue_limits(queue, limits)
    for n in range(12):
        await store.submit(NewJob(type="email", max_attempts=3, queue=queue, partition_key=f"k{n}"))
    claimed: Sequence[Job] = await store.claim(3, LEASE, queue, types=TEST_TYPES)
    assert len(claimed) == 3

    for _ in range(3):
        leases = {job.lease for job in claimed}
        # And an ending of a lease nobody holds: it is in no answer.
        endings = [(lease, Decision.complete()) for lease in [*leases, Lease(uuid4(), 1)]]
        store.answers.clear()

        held, claimed = await store.record_and_claim(endings, 3, LEASE, queue, types=TEST_TYPES)

        assert held == leases
        assert len(claimed) == 3
        name, rows = store.answers[0]
        assert name == statement
        carrying = [row for row in rows if row["ended_ids"] is not None]
        assert len(rows) == 3
        assert len(carrying) == 1
        (row,) = carrying
        assert set(zip(row["ended_ids"], row["ended_tokens"], strict=True)) == {
            (lease.job_id, lease.token) for lease in leases
        }
