"""Plain-function handlers: each runs in a thread of the pool's own, side by side up to
the worker count, and fails and is retried as an async one does."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.status import Status
from tests.fakes import InMemoryJobStore, wall_clock
from tests.unit.pool_harness import config, make_pool, running, settled, submit


async def test_plain_function_handler_runs_in_a_thread() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()
    threads: list[int] = []

    @registry.handler("blocking")
    def blocking(ctx: JobContext, payload: Any) -> None:
        threads.append(threading.get_ident())

    job = await submit(store, "blocking")
    async with running(make_pool(store, registry)):
        done = await settled(store, job)

    assert done.status is Status.COMPLETED
    assert threads
    assert threads != [threading.get_ident()]


async def test_plain_function_handler_failure_is_retried() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()

    @registry.handler("blocking")
    def blocking(ctx: JobContext, payload: Any) -> None:
        if ctx.attempt == 1:
            raise OSError("disk full")

    job = await submit(store, "blocking")
    async with running(make_pool(store, registry)):
        done = await settled(store, job)

    assert (done.status, done.attempts, done.last_error) == (
        Status.COMPLETED,
        2,
        "OSError: disk full",
    )


async def test_plain_function_handlers_run_side_by_side_up_to_the_worker_count() -> None:
    # More than the default executor's threads on a small machine: each sync handler
    # gets a thread of the pool's own instead of queueing behind the others.
    workers = 12
    store = InMemoryJobStore(wall_clock)
    registry = Registry()
    all_in = threading.Barrier(workers, timeout=30)

    @registry.handler("together")
    def together(ctx: JobContext, payload: Any) -> None:
        all_in.wait()

    jobs = [await submit(store, "together") for _ in range(workers)]
    pool_config = config(workers=workers, job_timeout=timedelta(seconds=30))
    async with running(make_pool(store, registry, pool_config)):
        done = [await settled(store, job) for job in jobs]

    assert [job.status for job in done] == [Status.COMPLETED] * workers
