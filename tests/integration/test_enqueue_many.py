"""Enqueueing in-process: many jobs in one statement (`adapters.postgres.enqueue`), stored
exactly as returned, in the caller's transaction or one of its own."""

from __future__ import annotations

import asyncio
import gc
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue import enqueue, enqueue_many
from jobqueue.adapters.postgres import copy as copy_module
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.errors import IdempotencyConflict, InvalidJob
from jobqueue.domain.fields import JsonValue
from jobqueue.domain.job import NewJob
from jobqueue.domain.status import Status
from tests.support.enqueueing import arrived, job, notifications
from tests.support.job_rows import count_jobs

# A fixture of tests.support.enqueueing, used by name.
__all__ = ["notifications"]


async def test_many_jobs_come_back_in_the_order_given_exactly_as_stored(
    engine: AsyncEngine,
) -> None:
    news = [job(n) for n in range(1_500)]
    async with engine.begin() as connection:
        submitted = await enqueue_many(connection, news)

    assert [each.job.payload for each in submitted] == [new.payload for new in news]
    assert not any(each.replayed for each in submitted)
    assert len({each.job.id for each in submitted}) == 1_500
    # What was returned is what was stored.
    store = PostgresJobStore(engine)
    for each in submitted[::250]:
        assert await store.get(each.job.id) == each.job
    assert await count_jobs(engine, Status.PENDING) == 1_500


async def test_copied_jobs_are_stored_as_a_single_enqueue_stores_them(
    engine: AsyncEngine,
) -> None:
    """Jobs without keys are written by COPY, which sets every column itself: they must
    match, column for column, what the server's defaults give a single insert."""
    async with engine.begin() as connection:
        single = await enqueue(connection, job(1))
        [copied] = await enqueue_many(connection, [job(1)])
    assert replace(copied.job, id=single.job.id) == single.job
    assert copied.job.run_at == copied.job.created_at == copied.job.updated_at
    assert await PostgresJobStore(engine).get(copied.job.id) == copied.job


async def test_every_field_a_submission_sets_is_copied_as_a_single_insert_stores_it(
    engine: AsyncEngine,
) -> None:
    # Each option given (none at its default): the COPY must send every one of them.
    full = NewJob.build(
        type="report",
        payload={"n": 1},
        max_attempts=7,
        queue="reports",
        priority=4,
        timeout=timedelta(seconds=45),
        delay=timedelta(minutes=5),
        traceparent="00-" + "a" * 32 + "-" + "b" * 16 + "-01",
    )
    async with engine.begin() as connection:
        single = await enqueue(connection, full)
        copied, plain = await enqueue_many(connection, [full, job(2)])
    store = PostgresJobStore(engine)
    stored = await store.get(copied.job.id)
    assert stored == copied.job
    assert replace(stored, id=single.job.id) == await store.get(single.job.id)
    assert (stored.queue, stored.priority, stored.timeout) == ("reports", 4, timedelta(seconds=45))
    assert await store.get(plain.job.id) == plain.job


@pytest.mark.parametrize("payload", [{}, {"n": 1}, [], 0], ids=["empty", "object", "list", "zero"])
@pytest.mark.parametrize("traceparent", [None, "00-" + "a" * 32 + "-" + "b" * 16 + "-01"])
async def test_columns_left_to_the_server_s_defaults_come_back_as_returned(
    engine: AsyncEngine, payload: JsonValue, traceparent: str | None
) -> None:
    """In a transaction, COPY leaves out the columns the server's defaults fill, and those
    whose every value is the default: what is stored must still be what was returned, and
    a batch mixing default and other values must keep each job's own."""
    news = [
        replace(NewJob.build(type="email", payload=payload), traceparent=traceparent),
        NewJob.build(type="sms", payload={}, max_attempts=7),
    ]
    async with engine.begin() as connection:
        submitted = await enqueue_many(connection, news)
        [alone] = await enqueue_many(connection, news[:1])
    store = PostgresJobStore(engine)
    for each in [*submitted, alone]:
        assert await store.get(each.job.id) == each.job
    assert [each.job.payload for each in submitted] == [payload, {}]
    assert [each.job.traceparent for each in submitted] == [traceparent, None]
    assert submitted[1].job.max_attempts == 7


async def test_an_autocommit_connection_s_copy_is_stamped_with_the_clock_it_read(
    engine: AsyncEngine,
) -> None:
    """On an autocommit connection the clock read and the COPY are two transactions, so
    the server's `now()` would differ from the returned stamps: every column is sent."""
    async with engine.connect() as plain:
        connection = await plain.execution_options(isolation_level="AUTOCOMMIT")
        submitted = await enqueue_many(connection, [job(n) for n in range(3)])
        await asyncio.sleep(0.01)
        later = await enqueue_many(connection, [job(9)])
    store = PostgresJobStore(engine)
    for each in [*submitted, *later]:
        assert await store.get(each.job.id) == each.job
    assert later[0].job.created_at > submitted[0].job.created_at


@pytest.mark.parametrize("announce", [True, False])
async def test_a_single_insert_reads_back_only_its_id_and_clock_and_returns_what_was_stored(
    engine: AsyncEngine, announce: bool
) -> None:
    """The insert returns the id and `created_at` only; the rest of the returned job is
    `NewJob.stored`: it must be, column for column, the row the server wrote."""
    new = replace(
        NewJob.build(type="email", payload={"b": 1, "a": [1.5, None]}, max_attempts=7),
        traceparent="00-" + "c" * 32 + "-" + "d" * 16 + "-01",
    )
    async with engine.begin() as connection:
        in_transaction = await enqueue(connection, new, announce=announce)
    on_its_own = await enqueue(engine, new, announce=announce)
    store = PostgresJobStore(engine)
    for each in (in_transaction, on_its_own, await store.submit(new)):
        assert await store.get(each.job.id) == each.job


# Due at once, at an instant in another offset, and after a delay; in the default queue
# or another, at the default priority or others: every write path must store what it
# returns, a delay counted from the server's clock.
SUBMISSIONS: list[dict[str, Any]] = [
    {},
    {"run_at": datetime(2031, 5, 4, 3, 2, 1, 654321, tzinfo=UTC) + timedelta(hours=7)},
    {"delay": timedelta(minutes=3, microseconds=5)},
    {"queue": "emails", "priority": 7},
    {"priority": 9, "delay": timedelta(seconds=1)},
]


async def test_every_write_path_stores_the_schedule_queue_and_priority_it_returns(
    engine: AsyncEngine,
) -> None:
    news = [NewJob.build(type="email", payload={"n": n}, **s) for n, s in enumerate(SUBMISSIONS)]
    keyed = [replace(new, idempotency_key=f"sched-{n}") for n, new in enumerate(news)]
    async with engine.begin() as connection:
        copied = await enqueue_many(connection, news)
        inserted = await enqueue_many(connection, keyed)
        singles = [await enqueue(connection, new) for new in news]
        # A batch where only some jobs are scheduled keeps the others due at once.
        mixed = await enqueue_many(connection, news[:1] * 2 + news[2:])
    async with engine.connect() as plain:
        autocommit = await plain.execution_options(isolation_level="AUTOCOMMIT")
        copied_alone = await enqueue_many(autocommit, news)
    pooled = [await enqueue(engine, new) for new in news]

    store = PostgresJobStore(engine)
    for batch in (copied, inserted, singles, mixed, copied_alone, pooled):
        for each in batch:
            stored = await store.get(each.job.id)
            assert stored == each.job
            new = next(n for n in news if n.payload == each.job.payload)
            assert stored.run_at == new.due_at(stored.created_at)
            assert (stored.queue, stored.priority) == (new.queue, new.priority)


async def test_a_refused_payload_fails_the_call_and_leaves_the_connection_usable(
    engine: AsyncEngine,
) -> None:
    # A lone surrogate passes `build` (it is a str) and is refused by the server's jsonb.
    bad = NewJob.build(type="email", payload={"to": "\ud800"})
    for keyed in (None, "k"):
        news = [job(1), replace(bad, idempotency_key=keyed)]
        with pytest.raises(InvalidJob):
            async with engine.begin() as connection:
                await enqueue_many(connection, news)
    assert await count_jobs(engine) == 0
    # The pool's connections still work, whichever path refused the job.
    for _ in range(3):
        async with engine.begin() as connection:
            await enqueue_many(connection, [job(2)])
    assert await count_jobs(engine) == 3


async def test_a_bulk_call_cancelled_while_its_copy_is_on_its_way_takes_the_copy_down(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The COPY runs while the returned jobs are built: a caller cancelled meanwhile must
    take the COPY down with it, leave no job and no task, and the pool usable."""
    building = asyncio.Event()
    build = copy_module._stored_meanwhile

    async def announced_build(*arguments: Any) -> Any:
        building.set()
        # Turns of the loop: the COPY is sent, and the server at work on its rows.
        for _ in range(20):
            await asyncio.sleep(0)
        return await build(*arguments)

    monkeypatch.setattr(copy_module, "_stored_meanwhile", announced_build)
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))
    before = asyncio.all_tasks()

    async def enqueues() -> None:
        async with engine.begin() as connection:
            await enqueue_many(connection, [job(n) for n in range(20_000)])

    task = asyncio.create_task(enqueues())
    await building.wait()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled()
    assert asyncio.all_tasks() - before <= {asyncio.current_task()}
    # A COPY left running on the connection given up would fail there, unobserved.
    await asyncio.sleep(0.05)
    gc.collect()
    loop.set_exception_handler(None)
    assert reported == []
    assert await count_jobs(engine) == 0
    monkeypatch.undo()
    async with engine.begin() as connection:
        assert len(await enqueue_many(connection, [job(1)])) == 1
    assert await count_jobs(engine) == 1


async def test_enqueue_many_on_an_engine_is_one_transaction_of_its_own(
    engine: AsyncEngine, notifications: asyncio.Queue[str]
) -> None:
    submitted = await enqueue_many(engine, [job(n) for n in range(20)])
    assert await count_jobs(engine) == 20
    assert await PostgresJobStore(engine).get(submitted[7].job.id) == submitted[7].job
    assert await arrived(notifications) == 1

    bad = NewJob.build(type="email", payload={"to": "\ud800"})
    with pytest.raises(InvalidJob):
        await enqueue_many(engine, [job(21), bad])
    assert await count_jobs(engine) == 20  # all or nothing
    assert await arrived(notifications) == 0


async def test_many_jobs_exist_only_if_the_transaction_commits(engine: AsyncEngine) -> None:
    async def fails_after_enqueueing() -> None:
        async with engine.begin() as connection:
            await enqueue_many(connection, [job(n) for n in range(10)])
            raise RuntimeError("the caller's own write failed")

    with pytest.raises(RuntimeError):
        await fails_after_enqueueing()
    assert await count_jobs(engine) == 0


async def test_taken_keys_are_replayed_and_a_different_request_is_refused(
    engine: AsyncEngine,
) -> None:
    async with engine.begin() as connection:
        [first] = await enqueue_many(connection, [job(1, key="k1")])
    async with engine.begin() as connection:
        again = await enqueue_many(connection, [job(2), job(1, key="k1"), job(3, key="k3")])
    assert [each.replayed for each in again] == [False, True, False]
    assert again[1].job == first.job

    with pytest.raises(IdempotencyConflict):
        async with engine.begin() as connection:
            await enqueue_many(connection, [job(4), job(99, key="k1")])
    assert await count_jobs(engine) == 3  # the refused call's other job rolled back too


async def test_the_same_key_twice_in_one_call_is_one_job(engine: AsyncEngine) -> None:
    async with engine.begin() as connection:
        first, second = await enqueue_many(connection, [job(1, key="k"), job(1, key="k")])
    assert (first.replayed, second.replayed) == (False, True)
    assert first.job == second.job
    assert await count_jobs(engine) == 1


async def test_what_is_not_a_new_job_is_refused_before_anything_is_sent(
    engine: AsyncEngine,
) -> None:
    async with engine.begin() as connection:
        with pytest.raises(InvalidJob):
            await enqueue_many(connection, [job(1), {"type": "email"}])  # type: ignore[list-item]
    assert await count_jobs(engine) == 0


async def test_nothing_to_enqueue_sends_nothing(engine: AsyncEngine) -> None:
    async with engine.begin() as connection:
        assert await enqueue_many(connection, []) == []
