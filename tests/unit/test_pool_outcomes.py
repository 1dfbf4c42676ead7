"""How the pool turns each way an attempt can end into the store's next state."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobqueue.domain.errors import Permanent, Transient
from jobqueue.domain.job import Job, Lease
from jobqueue.domain.outcome import Decision
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.status import Status
from jobqueue.domain.transitions import Operation
from jobqueue.entrypoints.worker.observer import NullObserver, PoolObserver
from tests.fakes import InMemoryJobStore, ManualClock, RecordingObserver, wall_clock
from tests.unit.pool_harness import (
    FAST,
    config,
    eventually,
    make_pool,
    running,
    settled,
    submit,
)


def fields(record: logging.LogRecord, *names: str) -> tuple[object, ...]:
    """The structured fields a log call passed as `extra=`."""
    return tuple(getattr(record, name, "<missing>") for name in names)


class RetryRecordingStore(InMemoryJobStore):
    def __init__(self) -> None:
        super().__init__(wall_clock)
        self.retries: list[tuple[int, timedelta]] = []

    async def record_many(self, endings: Sequence[tuple[Lease, Decision]]) -> Any:
        for lease, decision in endings:
            if decision.operation is Operation.BACKOFF and decision.delay is not None:
                attempt = next(j.attempts for j in self.jobs() if j.id == lease.job_id)
                self.retries.append((attempt, decision.delay))
        return await super().record_many(endings)


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
