"""Every job that ends failed or dead-lettered logs one WARNING naming it and its last
error, whichever way it got there; an attempt the job outlives logs none.

Against a real PostgreSQL, with pools in this process (as `test_worker.py` runs them), so
that the lines are caught with `caplog`.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from datetime import timedelta
from typing import Any
from uuid import UUID

import msgspec
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.errors import Permanent
from jobqueue.domain.fields import JsonValue
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.outcome import LEASE_EXPIRED_ERROR
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.status import Status
from tests.fakes import RecordingObserver
from tests.support.worker_pools import (
    CONFIG,
    SHORT_LEASE,
    FrozenStore,
    pool_on_own_engine,
    recover_when_expired,
    until,
)

FAILURE_PREFIXES = ("job failed: ", "job dead-lettered after ")


@pytest.fixture(autouse=True)
def _worker_lines(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="jobqueue")


async def _submit(
    store: PostgresJobStore, job_type: str, max_attempts: int, payload: JsonValue = None
) -> Job:
    new = NewJob(type=job_type, max_attempts=max_attempts, payload=payload)
    return (await store.submit(new)).job


def _warnings(caplog: pytest.LogCaptureFixture, job: Job) -> list[logging.LogRecord]:
    return [
        record
        for record in caplog.records
        if record.levelno == logging.WARNING and getattr(record, "job_id", None) == str(job.id)
    ]


def _failure_lines(caplog: pytest.LogCaptureFixture, job: Job) -> list[logging.LogRecord]:
    return [r for r in _warnings(caplog, job) if r.getMessage().startswith(FAILURE_PREFIXES)]


async def _until_failure_line(caplog: pytest.LogCaptureFixture, job: Job) -> None:
    async def logged() -> bool:
        return bool(_failure_lines(caplog, job))

    await until(logged, f"job {job.id}'s failure line is logged")


def _fields(record: logging.LogRecord) -> tuple[object, ...]:
    names = ("job_id", "job_type", "queue", "attempt", "status", "error")
    return tuple(getattr(record, name, "<missing>") for name in names)


async def _ends(store: PostgresJobStore, job_id: UUID, status: Status) -> Job:
    async def reached() -> bool:
        return (await store.get(job_id)).status is status

    await until(reached, f"job {job_id} is {status}")
    return await store.get(job_id)


async def test_a_retryable_failure_that_exhausts_its_attempts_logs_one_warning(
    engine: AsyncEngine, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = PostgresJobStore(engine)
    registry = Registry()

    @registry.handler("sync_ledger")
    async def sync_ledger(ctx: JobContext, payload: Any) -> None:
        raise ValueError(f"attempt {ctx.attempt} broke")

    job = await _submit(store, "sync_ledger", max_attempts=3)
    async with pool_on_own_engine(database_url, registry):
        await _until_failure_line(caplog, job)

    assert (await store.get(job.id)).status is Status.DEAD_LETTER
    # Each attempt logged its ERROR with a traceback; the job one WARNING, the last one's.
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [getattr(r, "attempt", None) for r in errors] == [1, 2, 3]
    (line,) = _warnings(caplog, job)
    assert line.getMessage() == "job dead-lettered after 3 attempts: ValueError: attempt 3 broke"
    assert _fields(line) == (
        str(job.id),
        "sync_ledger",
        "default",
        3,
        "dead_letter",
        "ValueError: attempt 3 broke",
    )


async def test_retryable_failures_the_job_outlives_log_no_warning(
    engine: AsyncEngine, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = PostgresJobStore(engine)
    registry = Registry()

    @registry.handler("flaky")
    async def flaky(ctx: JobContext, payload: Any) -> None:
        if ctx.attempt < 3:
            raise ValueError(f"attempt {ctx.attempt} broke")

    job = await _submit(store, "flaky", max_attempts=3)
    async with pool_on_own_engine(database_url, registry):
        done = await _ends(store, job.id, Status.COMPLETED)

    assert done.attempts == 3
    assert len([r for r in caplog.records if r.levelno == logging.ERROR]) == 2
    assert _warnings(caplog, job) == []


class Greeting(msgspec.Struct, forbid_unknown_fields=True):
    name: str


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        # The handler says retrying is pointless.
        ({"name": "Ada"}, "Permanent: no such customer 'Ada'"),
        # A payload its type's handler cannot take: the worker ends it as unknown types
        # were ended before claims were by type (now such a job waits for a process
        # that runs its type: `test_pool_outcomes.py`).
        (
            {"nom": "Ada"},
            "InvalidPayload: invalid payload for job type 'greet': "
            "Object contains unknown field `nom`",
        ),
    ],
    ids=["permanent", "payload_that_does_not_fit"],
)
async def test_a_job_that_fails_for_good_logs_one_warning(
    engine: AsyncEngine,
    database_url: str,
    caplog: pytest.LogCaptureFixture,
    payload: JsonValue,
    error: str,
) -> None:
    store = PostgresJobStore(engine)
    registry = Registry()

    @registry.handler("greet", payload=Greeting)
    async def greet(ctx: JobContext, payload: Greeting) -> None:
        raise Permanent(f"no such customer {payload.name!r}")

    job = await _submit(store, "greet", max_attempts=5, payload=payload)
    async with pool_on_own_engine(database_url, registry):
        await _until_failure_line(caplog, job)

    done = await store.get(job.id)
    assert (done.status, done.attempts, done.last_error) == (Status.FAILED, 1, error)
    (line,) = _warnings(caplog, job)
    assert line.getMessage() == f"job failed: {error}"
    assert line.exc_info is None
    assert _fields(line) == (str(job.id), "greet", "default", 1, "failed", error)


async def test_a_timeout_on_the_last_attempt_logs_one_failure_line(
    engine: AsyncEngine, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = PostgresJobStore(engine)
    registry = Registry()

    @registry.handler("hang")
    async def hang(ctx: JobContext, payload: Any) -> None:
        await asyncio.Event().wait()

    job = await _submit(store, "hang", max_attempts=2)
    quick = replace(CONFIG, job_timeout=timedelta(milliseconds=50))
    async with pool_on_own_engine(database_url, registry, quick):
        await _until_failure_line(caplog, job)

    assert (await store.get(job.id)).status is Status.DEAD_LETTER
    # Each timeout is a WARNING of its attempt; the failure line comes once, at the end.
    assert [r.getMessage() for r in _warnings(caplog, job)] == [
        "job timed out",
        "job timed out",
        "job dead-lettered after 2 attempts: attempt timed out after 0.05s",
    ]


async def test_a_lease_expired_on_the_last_attempt_is_logged_once_by_recovery(
    engine: AsyncEngine, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = PostgresJobStore(engine)
    gate = asyncio.Event()
    started: list[int] = []
    observer = RecordingObserver()
    registry = Registry()

    @registry.handler("report")
    async def stuck(ctx: JobContext, payload: Any) -> None:
        started.append(ctx.attempt)
        await gate.wait()
        raise Permanent("finished too late")

    job = await _submit(store, "report", max_attempts=1)
    frozen = replace(CONFIG, workers=1, lease_duration=SHORT_LEASE)
    async with pool_on_own_engine(database_url, registry, frozen, observer, FrozenStore):

        async def running() -> bool:
            return started == [1]

        await until(running, "the pool runs the job")
        recovered = await recover_when_expired(store, job.id)
        assert recovered.status is Status.DEAD_LETTER
        # Said by the recovery (the worker running the job may be dead) ...
        (line,) = _failure_lines(caplog, job)
        assert line.getMessage() == f"job dead-lettered after 1 attempt: {LEASE_EXPIRED_ERROR}"
        assert _fields(line) == (
            str(job.id),
            "report",
            "default",
            1,
            "dead_letter",
            LEASE_EXPIRED_ERROR,
        )
        assert not [r for r in caplog.records if r.getMessage().startswith("lease expired;")]

        # ... and not again by the worker, whose late ending is refused by the fence.
        gate.set()

        async def refused() -> bool:
            return bool(observer.lost)

        await until(refused, "the worker's late ending is refused")

    assert _failure_lines(caplog, job) == [line]
    assert (await store.get(job.id)).status is Status.DEAD_LETTER
