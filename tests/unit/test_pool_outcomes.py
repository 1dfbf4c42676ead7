"""How the pool turns each way an attempt can end into the store's next state."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobqueue.domain.errors import Permanent
from jobqueue.domain.outcome import Decision
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.status import Status
from tests.fakes import InMemoryJobStore, RecordingObserver, wall_clock
from tests.support.recorded_retries import RetryRecordingStore
from tests.unit.pool_harness import FAST, make_pool, running, settled, submit


@dataclass
class Greeting:
    name: str


async def test_successful_job_is_completed_with_its_context() -> None:
    store = InMemoryJobStore(wall_clock)
    observer = RecordingObserver()
    registry = Registry()
    seen: list[tuple[JobContext, Any]] = []

    @registry.handler("greet")
    async def greet(ctx: JobContext, payload: Any) -> None:
        seen.append((ctx, payload))

    job = await submit(store, "greet", {"name": "Ada"}, max_attempts=4)
    before = datetime.now(UTC)
    async with running(make_pool(store, registry, observer=observer)):
        done = await settled(store, job)

    assert (done.status, done.attempts) == (Status.COMPLETED, 1)
    ((ctx, payload),) = seen
    assert payload == {"name": "Ada"}
    assert (ctx.job_id, ctx.job_type, ctx.attempt, ctx.max_attempts) == (job.id, "greet", 1, 4)
    assert before < ctx.deadline <= datetime.now(UTC) + FAST.job_timeout
    assert [j.id for j in observer.started] == [job.id]
    assert [(j.id, d) for j, d, _ in observer.finished] == [(job.id, Decision.complete())]


async def test_declared_payload_type_is_decoded_before_the_handler_sees_it() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()
    seen: list[object] = []

    @registry.handler("greet", payload=Greeting)
    async def greet(ctx: JobContext, payload: Greeting) -> None:
        seen.append(payload)

    job = await submit(store, "greet", {"name": "Ada"})
    async with running(make_pool(store, registry)):
        await settled(store, job)

    assert seen == [Greeting("Ada")]


async def test_failing_job_is_retried_with_backoff_until_it_succeeds() -> None:
    store = RetryRecordingStore()
    registry = Registry()
    calls: list[int] = []

    @registry.handler("flaky")
    async def flaky(ctx: JobContext, payload: Any) -> None:
        calls.append(ctx.attempt)
        if ctx.attempt < 3:
            raise ConnectionError("try again")

    job = await submit(store, "flaky", max_attempts=5)
    async with running(make_pool(store, registry)):
        done = await settled(store, job)

    assert (done.status, done.attempts) == (Status.COMPLETED, 3)
    assert done.last_error == "ConnectionError: try again"
    assert calls == [1, 2, 3]
    assert [attempt for attempt, _ in store.retries] == [1, 2]
    for attempt, delay in store.retries:
        ceiling = FAST.backoff.ceiling(attempt)
        assert ceiling / 2 <= delay <= ceiling


async def test_retry_delay_comes_from_the_injected_random_source() -> None:
    store = RetryRecordingStore()
    registry = Registry()

    @registry.handler("flaky")
    async def flaky(ctx: JobContext, payload: Any) -> None:
        if ctx.attempt == 1:
            raise ConnectionError("once")

    job = await submit(store, "flaky")
    async with running(make_pool(store, registry, rand=lambda: 0.0)):
        await settled(store, job)

    assert store.retries == [(1, FAST.backoff.ceiling(1) / 2)]


async def test_failure_of_the_last_attempt_dead_letters_the_job() -> None:
    store = RetryRecordingStore()
    registry = Registry()

    @registry.handler("broken")
    async def broken(ctx: JobContext, payload: Any) -> None:
        raise RuntimeError(f"boom {ctx.attempt}")

    job = await submit(store, "broken", max_attempts=2)
    async with running(make_pool(store, registry)):
        done = await settled(store, job)

    assert (done.status, done.attempts) == (Status.DEAD_LETTER, 2)
    assert done.last_error == "RuntimeError: boom 2"
    assert [attempt for attempt, _ in store.retries] == [1]


class Refused(Permanent):
    pass


def _raise_permanent() -> None:
    raise Permanent("card declined")


def _raise_permanent_subclass() -> None:
    raise Refused("card declined")


def _raise_wrapped_permanent() -> None:
    try:
        raise Permanent("card declined")
    except Permanent as cause:
        raise RuntimeError("payment failed") from cause


@pytest.mark.parametrize(
    "raiser", [_raise_permanent, _raise_permanent_subclass, _raise_wrapped_permanent]
)
async def test_permanent_error_fails_the_job_without_retrying(raiser: Any) -> None:
    store = RetryRecordingStore()
    registry = Registry()

    @registry.handler("pay")
    async def pay(ctx: JobContext, payload: Any) -> None:
        raiser()

    job = await submit(store, "pay", max_attempts=5)
    async with running(make_pool(store, registry)):
        done = await settled(store, job)

    assert (done.status, done.attempts) == (Status.FAILED, 1)
    assert done.last_error is not None
    assert store.retries == []


async def test_a_job_of_a_type_without_a_handler_here_waits_for_a_process_that_has_one() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()

    @registry.handler("known")
    async def known(ctx: JobContext, payload: Any) -> None:
        pass

    elsewhere = await submit(store, "runs-elsewhere", max_attempts=5)
    here = await submit(store, "known")
    async with running(make_pool(store, registry)):
        await settled(store, here)
    # Never claimed, never failed: still pending, its attempts untouched.
    waiting = await store.get(elsewhere.id)
    assert (waiting.status, waiting.attempts) == (Status.PENDING, 0)

    other = Registry()

    @other.handler("runs-elsewhere")
    async def runs(ctx: JobContext, payload: Any) -> None:
        pass

    async with running(make_pool(store, other)):
        done = await settled(store, elsewhere)
    assert (done.status, done.attempts) == (Status.COMPLETED, 1)


async def test_payload_the_decoder_refuses_fails_permanently() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()
    calls: list[object] = []

    @registry.handler("greet", payload=Greeting)
    async def greet(ctx: JobContext, payload: Greeting) -> None:
        calls.append(payload)

    job = await submit(store, "greet", {"nom": "Ada"}, max_attempts=5)
    async with running(make_pool(store, registry)):
        done = await settled(store, job)

    assert (done.status, done.attempts) == (Status.FAILED, 1)
    assert done.last_error is not None
    assert done.last_error.startswith("InvalidPayload: invalid payload for job type 'greet'")
    assert calls == []


async def test_a_payload_the_handler_cannot_take_is_one_warning_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="jobqueue")
    store = InMemoryJobStore(wall_clock)
    registry = Registry()

    @registry.handler("greet", payload=Greeting)
    async def greet(ctx: JobContext, payload: Greeting) -> None:
        pass

    job = await submit(store, "greet", payload={"nom": "Ada"}, max_attempts=1)
    async with running(make_pool(store, registry)):
        await settled(store, job)

    (record,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert record.getMessage().startswith("job failed: InvalidPayload: ")
    assert record.exc_info is None


@pytest.mark.parametrize(
    "error",
    [SystemExit(3), KeyboardInterrupt(), asyncio.CancelledError("handler's own")],
    ids=["SystemExit", "KeyboardInterrupt", "CancelledError"],
)
async def test_base_exception_from_a_handler_is_a_retryable_failure_not_a_crash(
    error: BaseException,
) -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()

    @registry.handler("rogue")
    async def rogue(ctx: JobContext, payload: Any) -> None:
        if ctx.attempt == 1:
            raise error

    @registry.handler("after")
    async def after(ctx: JobContext, payload: Any) -> None:
        pass

    rogue_job = await submit(store, "rogue")
    async with running(make_pool(store, registry)) as pool_task:
        done = await settled(store, rogue_job)
        later = await settled(store, await submit(store, "after"))
        assert not pool_task.done()

    assert (done.status, done.attempts) == (Status.COMPLETED, 2)
    assert done.last_error is not None
    assert done.last_error.startswith(type(error).__name__)
    assert later.status is Status.COMPLETED


class ServerSaidWait(Exception):
    def __init__(self, seconds: float) -> None:
        super().__init__(f"come back in {seconds}s")
        self.retry_after = timedelta(seconds=seconds)


async def test_retry_after_from_the_error_is_a_floor_for_the_backoff_delay() -> None:
    store = RetryRecordingStore()
    registry = Registry()

    @registry.handler("throttled")
    async def throttled(ctx: JobContext, payload: Any) -> None:
        if ctx.attempt == 1:
            # Wrapped, as a handler calling a client library would see it.
            raise RuntimeError("upstream refused") from ServerSaidWait(0.2)

    job = await submit(store, "throttled")
    async with running(make_pool(store, registry, rand=lambda: 0.0)):
        done = await settled(store, job)

    assert done.status is Status.COMPLETED
    assert FAST.backoff.ceiling(1) / 2 < timedelta(seconds=0.2)
    assert store.retries == [(1, timedelta(seconds=0.2))]
