"""What the pool logs of each attempt and its ending: a traceback only where the
handler did not foresee the error, the job's fields on every line (the handler's own
logger's too), a lost lease logged and reported, and an observer whose failure
disturbs no attempt."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import pytest

from jobqueue.domain.errors import Permanent, Transient
from jobqueue.domain.job import Job
from jobqueue.domain.outcome import Decision
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.status import Status
from jobqueue.entrypoints.worker.observer import NullObserver, PoolObserver
from tests.fakes import InMemoryJobStore, ManualClock, RecordingObserver, wall_clock
from tests.unit.pool_harness import FAST, eventually, make_pool, running, settled, submit


def fields(record: logging.LogRecord, *names: str) -> tuple[object, ...]:
    """The structured fields a log call passed as `extra=`."""
    return tuple(getattr(record, name, "<missing>") for name in names)


async def test_handler_exception_is_logged_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="jobqueue")
    store = InMemoryJobStore(wall_clock)
    registry = Registry()

    @registry.handler("broken")
    async def broken(ctx: JobContext, payload: Any) -> None:
        raise ValueError("bad input 42")

    job = await submit(store, "broken", max_attempts=1)
    async with running(make_pool(store, registry)):
        await settled(store, job)

    (record,) = [r for r in caplog.records if r.exc_info and r.levelno >= logging.ERROR]
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], ValueError)
    assert getattr(record, "job_id", None) == str(job.id)
    assert "Traceback" in caplog.text
    assert "in broken" in caplog.text  # the handler's own frame is in the traceback


@pytest.mark.parametrize(
    ("raised", "level", "message"),
    [
        # INFO: the job's failure line is the WARNING (`test_failure_lines.py`).
        (Permanent("no such customer"), logging.INFO, "job failed permanently: Permanent: "),
        (
            Transient("receiver busy"),
            logging.INFO,
            "job failed, as its handler foresaw: Transient: ",
        ),
    ],
)
async def test_an_ending_the_handler_foresaw_is_logged_without_a_traceback(
    caplog: pytest.LogCaptureFixture, raised: Exception, level: int, message: str
) -> None:
    caplog.set_level(logging.INFO, logger="jobqueue")
    store = InMemoryJobStore(wall_clock)
    registry = Registry()

    @registry.handler("foreseen")
    async def foreseen(ctx: JobContext, payload: Any) -> None:
        raise raised

    job = await submit(store, "foreseen", max_attempts=1)
    async with running(make_pool(store, registry)):
        await settled(store, job)

    (record,) = [r for r in caplog.records if r.getMessage().startswith(message)]
    assert record.levelno == level
    assert record.exc_info is None
    assert getattr(record, "job_id", None) == str(job.id)
    assert "Traceback" not in caplog.text


async def test_every_attempt_logs_started_and_finished_with_structured_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="jobqueue.worker")
    store = InMemoryJobStore(wall_clock)
    registry = Registry()

    @registry.handler("flaky")
    async def flaky(ctx: JobContext, payload: Any) -> None:
        if ctx.attempt == 1:
            raise ConnectionError("reset")

    job = await submit(store, "flaky")
    async with running(make_pool(store, registry)):
        await settled(store, job)

    started = [r for r in caplog.records if r.getMessage() == "job started"]
    finished = [r for r in caplog.records if r.getMessage() == "job finished"]
    assert [fields(r, "job_id", "job_type", "attempt") for r in started] == [
        (str(job.id), "flaky", 1),
        (str(job.id), "flaky", 2),
    ]
    first, second = finished
    assert fields(first, "outcome", "error") == ("retried", "ConnectionError: reset")
    (retry_in,) = fields(first, "retry_in")
    assert isinstance(retry_in, float)
    assert 0 < retry_in <= FAST.backoff.ceiling(1).total_seconds()
    assert fields(second, "outcome", "error", "retry_in") == ("completed", None, None)
    for record in finished:
        (duration_ms,) = fields(record, "duration_ms")
        assert isinstance(duration_ms, float)
        assert duration_ms >= 0


async def test_handler_logger_carries_the_job_fields(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="jobqueue")
    store = InMemoryJobStore(wall_clock)
    registry = Registry()

    @registry.handler("chatty")
    async def chatty(ctx: JobContext, payload: Any) -> None:
        ctx.logger.info("hello from the handler")

    job = await submit(store, "chatty")
    async with running(make_pool(store, registry)):
        await settled(store, job)

    (record,) = [r for r in caplog.records if r.getMessage() == "hello from the handler"]
    assert fields(record, "job_id", "job_type", "attempt") == (str(job.id), "chatty", 1)


async def test_lost_lease_is_logged_and_reported_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="jobqueue.worker")
    clock = ManualClock()
    store = InMemoryJobStore(clock)
    observer = RecordingObserver()
    registry = Registry()
    gate = asyncio.Event()
    entered: list[int] = []

    @registry.handler("slow")
    async def slow(ctx: JobContext, payload: Any) -> None:
        entered.append(ctx.attempt)
        await gate.wait()

    job = await submit(store, "slow")
    async with running(make_pool(store, registry, observer=observer)) as pool_task:
        await eventually(lambda: entered == [1], "the first attempt runs")
        # The lease runs out while the handler still works: recovery hands the job on.
        clock.advance(FAST.lease_duration * 2)
        assert [j.id for j in await store.recover_expired(10)] == [job.id]
        gate.set()
        await eventually(lambda: bool(observer.lost), "the stale outcome is refused")
        done = await settled(store, job)
        assert not pool_task.done()

    assert [j.lease_token for j in observer.lost] == [1]
    assert (done.status, done.attempts, done.lease_token) == (Status.COMPLETED, 2, 2)
    warnings = [
        r for r in caplog.records if r.levelno == logging.WARNING and "lease lost" in r.getMessage()
    ]
    assert len(warnings) == 1
    outcomes = [
        getattr(r, "outcome", None) for r in caplog.records if r.getMessage() == "job finished"
    ]
    assert outcomes == ["lease_lost", "completed"]


# The methods a simple attempt calls raise; the rest are `NullObserver`'s.
class ExplodingObserver(NullObserver):
    def attempt_started(self, job: Job) -> None:
        raise RuntimeError("metrics down")

    def attempt_finished(self, job: Job, decision: Decision, duration_seconds: float) -> None:
        raise RuntimeError("metrics down")

    def lease_lost(self, job: Job) -> None:
        raise RuntimeError("metrics down")

    def recovered(self, jobs: Sequence[Job]) -> None:
        raise RuntimeError("metrics down")


async def test_failing_observer_does_not_disturb_attempts() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()

    @registry.handler("noop")
    async def noop(ctx: JobContext, payload: Any) -> None:
        pass

    observer: PoolObserver = ExplodingObserver()
    job = await submit(store, "noop")
    async with running(make_pool(store, registry, observer=observer)):
        done = await settled(store, job)

    assert (done.status, done.attempts) == (Status.COMPLETED, 1)
