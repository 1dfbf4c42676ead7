"""`PostgresJobTypes` on a real PostgreSQL: publications round-trip every option, a
later one replaces an earlier, workers publishing together do not deadlock, and a row
this version cannot read is left out with a warning."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.job_types import PostgresJobTypes
from jobqueue.domain.job_types import JobType, JsonSchema
from jobqueue.domain.status import Status
from jobqueue.domain.type_options import TypeOptions
from jobqueue.domain.unique import Unique

_SCHEMA: JsonSchema = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
}


async def test_a_publication_reads_back_whole(engine: AsyncEngine) -> None:
    catalog = PostgresJobTypes(engine)
    unique = Unique(
        by=("account", "region"),
        states=frozenset({Status.PENDING, Status.PROCESSING, Status.COMPLETED}),
        period=timedelta(hours=1),
    )
    types = [
        JobType("b", None),
        JobType(
            "a",
            _SCHEMA,
            TypeOptions("mail", 4, 9, timedelta(seconds=90), unique, ("tenant",)),
            "Sends mail.",
        ),
    ]

    await catalog.publish(types, by="host:1")

    published = await catalog.published()
    assert [each.type for each in published] == sorted(types, key=lambda each: each.name)
    assert {each.published_by for each in published} == {"host:1"}


async def test_a_later_publication_replaces_the_earlier(engine: AsyncEngine) -> None:
    catalog = PostgresJobTypes(engine)
    await catalog.publish([JobType("a", _SCHEMA)], by="host:1")
    (first,) = await catalog.published()

    await catalog.publish([JobType("a", None, TypeOptions(priority=1))], by="host:2")

    (second,) = await catalog.published()
    assert second.type == JobType("a", None, TypeOptions(priority=1))
    assert second.published_by == "host:2"
    assert second.published_at > first.published_at


async def test_workers_publishing_overlapping_types_together_all_succeed(
    engine: AsyncEngine,
) -> None:
    catalog = PostgresJobTypes(engine)
    names = [f"t{n:02}" for n in range(30)]

    async def publish(worker: int) -> None:
        # Each in its own order: the statement sorts them, so none waits in a cycle.
        mine = names[worker:] + names[:worker]
        for _ in range(5):
            await catalog.publish([JobType(name, None) for name in mine], by=f"host:{worker}")

    await asyncio.wait_for(asyncio.gather(*(publish(n) for n in range(4))), timeout=60)
    assert [each.type.name for each in await catalog.published()] == names


async def test_a_row_this_version_cannot_read_is_left_out(
    engine: AsyncEngine, caplog: pytest.LogCaptureFixture
) -> None:
    catalog = PostgresJobTypes(engine)
    await catalog.publish([JobType("good", None)], by="host:1")
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO job_types (name, options, published_by) VALUES"
                ' (\'future\', \'{"queue": "default", "priority": 0, "extra": 1}\', \'h:2\'),'
                " ('broken', '{\"queue\": \"no spaces allowed\", \"priority\": 0}', 'h:3')"
            )
        )

    with caplog.at_level(logging.WARNING, "jobqueue"):
        published = await catalog.published()

    # Unknown keys are a newer version's: what is known is read.
    assert [each.type.name for each in published] == ["future", "good"]
    assert [r.getMessage() for r in caplog.records] == [
        "a published job type cannot be read; it is left out"
    ]
    assert getattr(caplog.records[0], "job_type", None) == "broken"
