"""The wake-up each enqueueing transaction sends to idle workers
(`adapters.postgres.enqueue`): once at its commit, never for a rollback or when asked
not to, and from an engine (autocommit) with the insert itself."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue import enqueue, enqueue_many
from jobqueue.adapters.postgres import enqueue as enqueue_module
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.errors import IdempotencyConflict
from tests.support.enqueueing import arrived, job, notifications
from tests.support.job_rows import count_jobs

# A fixture of tests.support.enqueueing, used by name.
__all__ = ["notifications"]


async def test_a_transaction_that_enqueues_notifies_once_when_it_commits(
    engine: AsyncEngine, notifications: asyncio.Queue[str]
) -> None:
    async with engine.begin() as connection:
        await enqueue(connection, job(1))
        await enqueue(connection, job(2))
        await enqueue_many(connection, [job(n) for n in range(3, 50)])
        # Not before the commit: a worker woken now would find nothing.
        assert await arrived(notifications, wait=0.3) == 0
    assert await arrived(notifications) == 1


async def test_a_rolled_back_enqueue_notifies_nobody(
    engine: AsyncEngine, notifications: asyncio.Queue[str]
) -> None:
    async def rolled_back() -> None:
        async with engine.begin() as connection:
            await enqueue(connection, job(1))
            raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        await rolled_back()
    assert await arrived(notifications) == 0


async def test_announce_false_sends_no_notification(
    engine: AsyncEngine, notifications: asyncio.Queue[str]
) -> None:
    async with engine.begin() as connection:
        await enqueue(connection, job(1), announce=False)
        await enqueue_many(connection, [job(2)], announce=False)
    assert await arrived(notifications) == 0
    assert await count_jobs(engine) == 2


# --- enqueue on its own (an engine: autocommit, one round trip) ----------------------------


async def test_enqueue_on_an_engine_commits_at_once_and_then_wakes_workers(
    engine: AsyncEngine, notifications: asyncio.Queue[str]
) -> None:
    submitted = await enqueue(engine, job(1))

    assert await PostgresJobStore(engine).get(submitted.job.id) == submitted.job
    assert await arrived(notifications) == 1
    # A burst costs a few notifications, not one per job.
    await asyncio.gather(*(enqueue(engine, job(n)) for n in range(2, 52)))
    assert 1 <= await arrived(notifications) < 50


async def test_a_quiet_engine_s_wake_up_leaves_with_the_insert_itself(
    engine: AsyncEngine,
    notifications: asyncio.Queue[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every NOTIFY of the notifier's own fails: what arrives came with the insert, in
    # its commit, so a producer that drops its engine right after the call still woke
    # the workers.
    async def refused() -> None:
        raise ConnectionRefusedError("the notifier's own send")

    monkeypatch.setattr(enqueue_module, "pg_notify", lambda engine: refused)
    await enqueue(engine, job(1))
    assert await arrived(notifications) == 1


async def test_enqueue_on_an_engine_replays_keys_and_can_stay_quiet(
    engine: AsyncEngine, notifications: asyncio.Queue[str]
) -> None:
    first = await enqueue(engine, job(1, key="k"), announce=False)
    again = await enqueue(engine, job(1, key="k"))
    assert (first.replayed, again.replayed) == (False, True)
    assert again.job == first.job
    # Neither announced: the first was asked not to, the replay created nothing new.
    assert await arrived(notifications) == 0
    with pytest.raises(IdempotencyConflict):
        await enqueue(engine, job(2, key="k"))


async def test_enqueue_on_an_engine_leaves_no_task_behind(
    engine: AsyncEngine, notifications: asyncio.Queue[str]
) -> None:
    for n in range(5):
        await enqueue(engine, job(n))
    assert await arrived(notifications) >= 1
    # Nothing owed any more: the sender's task has ended, so dropping the engine or
    # closing the loop leaves no pending task behind (asyncio would warn of it).
    names = {task.get_name() for task in asyncio.all_tasks() if not task.done()}
    assert "jobqueue notifier" not in names
