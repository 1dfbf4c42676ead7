"""An attempt over the job's timeout is cancelled and retried; what the handler makes of
the cancellation, or a TimeoutError of its own, is what the attempt ended with."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any

from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.status import Status
from tests.fakes import InMemoryJobStore, wall_clock
from tests.support.recorded_retries import RetryRecordingStore
from tests.unit.pool_harness import config, make_pool, running, settled, submit


async def test_attempt_over_the_job_timeout_is_retried_then_dead_lettered() -> None:
    store = RetryRecordingStore()
    registry = Registry()
    cancelled: list[int] = []

    @registry.handler("hang")
    async def hang(ctx: JobContext, payload: Any) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(ctx.attempt)
            raise

    job = await submit(store, "hang", max_attempts=2)
    pool = make_pool(store, registry, config(job_timeout=timedelta(milliseconds=20)))
    async with running(pool):
        done = await settled(store, job)

    assert (done.status, done.attempts) == (Status.DEAD_LETTER, 2)
    assert done.last_error == "attempt timed out after 0.02s"
    assert [attempt for attempt, _ in store.retries] == [1]
    assert cancelled == [1, 2]


async def test_a_handler_that_swallows_its_timeout_and_returns_has_succeeded() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()
    after: list[str] = []

    @registry.handler("stubborn")
    async def stubborn(ctx: JobContext, payload: Any) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()
        # Finishing its work after the timeout is the handler's choice: the attempt is
        # then what the handler made of it.
        await asyncio.sleep(0.001)
        after.append("awaited")

    job = await submit(store, "stubborn", max_attempts=1)
    pool = make_pool(store, registry, config(job_timeout=timedelta(milliseconds=20)))
    async with running(pool):
        done = await settled(store, job)

    assert (done.status, done.last_error) == (Status.COMPLETED, None)
    assert after == ["awaited"]


async def test_a_timeout_turned_into_another_error_is_that_error() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()

    @registry.handler("converts")
    async def converts(ctx: JobContext, payload: Any) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise RuntimeError("gave up waiting") from None

    job = await submit(store, "converts", max_attempts=1)
    pool = make_pool(store, registry, config(job_timeout=timedelta(milliseconds=20)))
    async with running(pool):
        done = await settled(store, job)

    assert (done.status, done.last_error) == (Status.DEAD_LETTER, "RuntimeError: gave up waiting")


async def test_timeout_error_raised_by_the_handler_itself_is_an_ordinary_failure() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()

    @registry.handler("upstream")
    async def upstream(ctx: JobContext, payload: Any) -> None:
        raise TimeoutError("upstream did not answer")

    job = await submit(store, "upstream", max_attempts=1)
    async with running(make_pool(store, registry)):
        done = await settled(store, job)

    assert done.last_error == "TimeoutError: upstream did not answer"
