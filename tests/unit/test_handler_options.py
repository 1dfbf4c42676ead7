"""What a handler declares for its job type: the queue, priority and attempt budget of
the jobs submitted without their own, how long one attempt may run, and how its retries
are spaced."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobqueue.domain.backoff import Backoff
from jobqueue.domain.errors import InvalidJob
from jobqueue.domain.fields import DEFAULT_PRIORITY, DEFAULT_QUEUE
from jobqueue.domain.job import NewJob
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.status import Status
from jobqueue.domain.unique import Unique
from tests.fakes import InMemoryJobStore, wall_clock
from tests.unit.pool_harness import config, eventually, make_pool, running, settled


def registry_with_options() -> Registry:
    registry = Registry()

    @registry.handler("email", queue="emails", priority=3, max_attempts=9)
    async def email(ctx: JobContext, payload: Any) -> None:
        pass

    @registry.handler("plain")
    async def plain(ctx: JobContext, payload: Any) -> None:
        pass

    return registry


def test_a_submission_leaving_them_out_gets_its_handler_s_options() -> None:
    new = NewJob.build(type="email", registered=registry_with_options())
    assert (new.queue, new.priority, new.max_attempts) == ("emails", 3, 9)


def test_the_submission_s_own_values_win_over_the_handler_s() -> None:
    new = NewJob.build(
        type="email",
        registered=registry_with_options(),
        queue="urgent",
        priority=0,
        max_attempts=2,
    )
    assert (new.queue, new.priority, new.max_attempts) == ("urgent", 0, 2)


def test_a_type_without_options_gets_the_defaults() -> None:
    new = NewJob.build(type="plain", registered=registry_with_options(), default_max_attempts=4)
    assert (new.queue, new.priority, new.max_attempts) == (DEFAULT_QUEUE, DEFAULT_PRIORITY, 4)
    # Nothing registered at all (a producer without the workers' code): the defaults too.
    anywhere = NewJob.build(type="email", registered=None, default_max_attempts=4)
    assert (anywhere.queue, anywhere.priority, anywhere.max_attempts) == ("default", 0, 4)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"queue": "no spaces"}, "job type 'x': queue name must be 1 to 64"),
        ({"queue": ""}, "job type 'x': queue name must be 1 to 64"),
        ({"priority": 10}, "job type 'x': priority must be between 0 (most urgent) and 9"),
        ({"max_attempts": 0}, "job type 'x': max_attempts must be between 1 and 100"),
        ({"timeout": timedelta(0)}, "job type 'x': timeout must be positive"),
    ],
)
def test_bad_handler_options_are_refused_at_registration(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Registry().handler("x", **options)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"queue": "a/b"}, "queue name must be 1 to 64"),
        ({"queue": "q" * 65}, "queue name must be 1 to 64"),
        ({"priority": -1}, "priority must be between 0 (most urgent) and 9, got -1"),
        ({"priority": True}, "priority must be an integer"),
    ],
)
def test_bad_queue_or_priority_at_submission_is_refused(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidJob) as refused:
        NewJob.build(type="plain", **fields)
    assert message in str(refused.value)


async def test_a_handler_s_timeout_bounds_its_attempts_instead_of_job_timeout() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()
    deadlines: list[datetime] = []

    @registry.handler("brief", timeout=timedelta(milliseconds=30))
    async def brief(ctx: JobContext, payload: Any) -> None:
        deadlines.append(ctx.deadline)
        await asyncio.Event().wait()

    new = NewJob.build(type="brief", registered=registry, max_attempts=1)
    job = (await store.submit(new)).job
    started = datetime.now(UTC)
    pool = make_pool(store, registry, config(job_timeout=timedelta(hours=1)))
    async with running(pool):
        done = await settled(store, job)

    assert done.status is Status.DEAD_LETTER
    assert done.last_error == "attempt timed out after 0.03s"
    assert started < deadlines[0] <= datetime.now(UTC) + timedelta(milliseconds=30)


async def test_a_submission_s_timeout_bounds_its_attempts_instead_of_the_handler_s() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()

    @registry.handler("patient", timeout=timedelta(hours=1))
    async def patient(ctx: JobContext, payload: Any) -> None:
        await asyncio.Event().wait()

    new = NewJob.build(
        type="patient", registered=registry, max_attempts=1, timeout=timedelta(milliseconds=30)
    )
    job = (await store.submit(new)).job
    pool = make_pool(store, registry, config(job_timeout=timedelta(hours=1)))
    async with running(pool):
        done = await settled(store, job)

    assert done.status is Status.DEAD_LETTER
    assert done.last_error == "attempt timed out after 0.03s"


async def test_a_handler_s_backoff_spaces_its_retries_instead_of_the_service_s() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()

    @registry.handler("patient", backoff=Backoff(timedelta(hours=1), timedelta(hours=2)))
    async def patient(ctx: JobContext, payload: Any) -> None:
        raise RuntimeError("not yet")

    @registry.handler("eager")
    async def eager(ctx: JobContext, payload: Any) -> None:
        raise RuntimeError("not yet")

    slow = (await store.submit(NewJob.build(type="patient", registered=registry))).job
    fast = (await store.submit(NewJob.build(type="eager", registered=registry))).job
    # The service's backoff: a second at most, so that the eager job's retry shows it.
    service = Backoff(timedelta(milliseconds=500), timedelta(seconds=1))
    pool = make_pool(store, registry, config(backoff=service))

    def retried(job_id: object) -> Any:
        return next(
            (
                j
                for j in store.jobs()
                if j.id == job_id and j.history and j.status is Status.PENDING
            ),
            None,
        )

    async with running(pool):
        await eventually(lambda: retried(slow.id) and retried(fast.id), "both retried once")
        patient_job, eager_job = retried(slow.id), retried(fast.id)

    # Attempt 1 waits [base/2, base]: half an hour to an hour, not the service's second.
    wait = patient_job.run_at - patient_job.updated_at
    assert timedelta(minutes=30) <= wait <= timedelta(hours=1)
    assert eager_job.run_at - eager_job.updated_at <= timedelta(seconds=1)


async def test_a_pool_claims_only_from_its_own_queue() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()
    ran: list[str] = []

    @registry.handler("work")
    async def work(ctx: JobContext, payload: Any) -> None:
        ran.append(str(ctx.job_id))

    mine = (await store.submit(NewJob.build(type="work", queue="mine"))).job
    other = (await store.submit(NewJob.build(type="work", queue="other"))).job
    pool = make_pool(store, registry, config(queue="mine"))
    async with running(pool):
        await settled(store, mine)
        await eventually(lambda: len(ran) == 1, "the job of the pool's queue ran")
    assert ran == [str(mine.id)]
    assert next(j for j in store.jobs() if j.id == other.id).status is Status.PENDING


async def test_within_a_queue_the_most_urgent_due_job_runs_first() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()
    order: list[int] = []

    @registry.handler("work")
    async def work(ctx: JobContext, payload: Any) -> None:
        order.append(payload["p"])

    template = NewJob.build(type="work")
    for priority in (5, 9, 0, 5, 3, 0):
        await store.submit(replace(template, payload={"p": priority}, priority=priority))
    pool = make_pool(store, registry, config(workers=1))
    async with running(pool):
        await eventually(lambda: len(order) == 6, "every job ran")
    assert order == [0, 0, 3, 5, 5, 9]


def test_a_handler_may_make_its_jobs_unique_and_a_submission_may_say_otherwise() -> None:
    registry = Registry()

    @registry.handler("sync_account", unique=Unique(by=("account",)))
    async def sync_account(ctx: object, payload: object) -> None: ...

    one = NewJob.build(type="sync_account", payload={"account": 1, "x": 1}, registered=registry)
    two = NewJob.build(type="sync_account", payload={"account": 1, "x": 2}, registered=registry)
    own = NewJob.build(
        type="sync_account",
        payload={"account": 1},
        registered=registry,
        unique=Unique(key="mine"),
    )

    assert one.unique_key == two.unique_key is not None
    assert one.unique_states == ("pending", "processing")
    assert own.unique_key == "mine"
    assert NewJob.build(type="other", payload={"account": 1}).unique_key is None
