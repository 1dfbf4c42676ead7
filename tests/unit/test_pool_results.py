"""A handler's return value becomes its job's result (or, when the job cannot keep it,
a permanent failure saying why); its progress reports reach the store at most once per
interval, the last one with the ending, from async and sync handlers alike."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from jobqueue.adapters.results import UnstorableResult, encode_result
from jobqueue.domain.job import Lease
from jobqueue.domain.progress import Progress
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.status import Status
from tests.fakes import InMemoryJobStore, wall_clock
from tests.unit.pool_harness import config, eventually, make_pool, running, settled, submit


@dataclasses.dataclass
class Found:
    url: str
    at: datetime


async def test_what_a_handler_returns_is_its_job_s_result() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()
    at = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)

    @registry.handler("fetch")
    async def fetch(ctx: JobContext, payload: Any) -> Found:
        return Found(url=payload["url"], at=at)

    @registry.handler("sync_sum")
    def sync_sum(ctx: JobContext, payload: Any) -> int:
        return sum(payload["numbers"])

    @registry.handler("nothing")
    async def nothing(ctx: JobContext, payload: Any) -> None:
        return None

    pool = make_pool(store, registry, config(workers=3))
    async with running(pool):
        fetched = await submit(store, "fetch", {"url": "https://example.org/a"})
        summed = await submit(store, "sync_sum", {"numbers": [1, 2, 3]})
        empty = await submit(store, "nothing")
        jobs = [await settled(store, job, Status.COMPLETED) for job in (fetched, summed, empty)]

    assert [job.result for job in jobs] == [
        {"url": "https://example.org/a", "at": "2026-12-05T12:00:00Z"},
        6,
        None,
    ]


@pytest.mark.parametrize(
    ("returned", "why"),
    [
        ({"blob": "x" * 2_000}, "over RESULT_MAX_BYTES (1,024)"),
        ({"name": "a\x00b"}, "NUL character"),
        (object(), "not JSON"),
        ("\ud800", "not JSON"),
    ],
)
async def test_a_result_the_job_cannot_keep_fails_it_for_good(returned: Any, why: str) -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()

    @registry.handler("odd")
    async def odd(ctx: JobContext, payload: Any) -> Any:
        return returned

    pool = make_pool(store, registry, config(result_max_bytes=1024))
    async with running(pool):
        job = await settled(store, await submit(store, "odd"), Status.FAILED)

    assert job.attempts == 1
    assert job.result is None
    assert job.last_error is not None
    assert why in job.last_error


def test_an_escaped_backslash_before_u0000_is_no_nul() -> None:
    assert encode_result({"path": "C:\\u0000"}, 100) == '{"path":"C:\\\\u0000"}'
    with pytest.raises(UnstorableResult):
        encode_result({"path": "C:\\\x00"}, 100)


async def test_progress_reaches_the_store_once_per_interval_and_the_last_with_the_end() -> None:
    writes: list[list[tuple[Lease, Progress]]] = []

    class Counting(InMemoryJobStore):
        async def record_progress(self, reports: Any) -> set[Lease]:
            writes.append(list(reports))
            return await super().record_progress(reports)

    store = Counting(wall_clock)
    registry = Registry()
    halfway, finish = asyncio.Event(), asyncio.Event()

    @registry.handler("steps")
    async def steps(ctx: JobContext, payload: Any) -> None:
        for done in range(1, 51):
            ctx.progress(done=done, total=100, message=f"step {done}")
        halfway.set()
        await finish.wait()
        for done in range(51, 101):
            ctx.progress(done=done, total=100)

    pool = make_pool(store, registry, config())
    async with running(pool):
        job = await submit(store, "steps")
        await asyncio.wait_for(halfway.wait(), 10)
        # Written as soon as the handler lets the loop run: its latest report only.
        await eventually(lambda: len(writes) >= 1, "the first report was written")
        kept = (await store.get(job.id)).progress
        finish.set()
        done = await settled(store, job, Status.COMPLETED)

    # Fifty reports each side of a wait: one write, and the last report with the end
    # (two writes only if a second passed in between, on a very slow machine).
    assert len(writes) <= 2
    assert [len(batch) for batch in writes] == [1] * len(writes)
    assert kept is not None
    assert (kept.done, kept.total, kept.message) == (50, 100, "step 50")
    assert done.progress is not None
    assert (done.progress.done, done.progress.fraction, done.progress.message) == (100, 1.0, None)


async def test_a_sync_handler_s_last_report_is_written_with_its_end() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()
    threads: set[int] = set()

    @registry.handler("sync_steps")
    def sync_steps(ctx: JobContext, payload: Any) -> None:
        threads.add(threading.get_ident())
        for step in range(1, 1001):
            ctx.progress(step / 1000, message=f"row {step}")

    pool = make_pool(store, registry, config())
    async with running(pool):
        job = await settled(store, await submit(store, "sync_steps"), Status.COMPLETED)

    assert threading.get_ident() not in threads
    assert job.progress is not None
    assert (job.progress.fraction, job.progress.message) == (1.0, "row 1000")


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"fraction": 1.5}, ValueError),
        ({"fraction": float("nan")}, ValueError),
        ({"fraction": "half"}, TypeError),
        ({"done": -1}, ValueError),
        ({"done": 3, "total": 2}, ValueError),
        ({"done": True}, ValueError),
        ({"message": 7}, TypeError),
        ({}, ValueError),
    ],
)
def test_a_report_that_makes_no_sense_is_refused_where_it_is_made(
    arguments: dict[str, Any], error: type[Exception]
) -> None:
    context = JobContext(uuid.uuid4(), "t", 1, 3, datetime.now(UTC), logger=_logger())
    with pytest.raises(error):
        context.progress(**arguments)


def test_a_report_is_kept_readable() -> None:
    report = Progress.build(message="a\x00b" + "x" * 2_000)

    assert report.message is not None
    assert report.message.startswith("a\\x00b")
    assert len(report.message) == 1_000
    assert report.message.endswith("…")


def _logger() -> Any:
    import logging

    return logging.getLogger("test")
