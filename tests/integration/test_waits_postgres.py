"""Waiting for a job's end against a real PostgreSQL: every way a job ends wakes the wait
through the triggers' notification (the waits here never re-read on their own: their
recheck is an hour), an unwatched ending sends none, and the in-process `jobqueue.wait`
answers an ended job and raises `NotEnded` when time runs out."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import asyncpg
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

import jobqueue
from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.endings import EndingWatch
from jobqueue.adapters.postgres.engine_waits import waits_of
from jobqueue.adapters.postgres.listener import Listener, asyncpg_connect
from jobqueue.adapters.postgres.notify import CHANNEL
from jobqueue.adapters.postgres.queries.jobs import ENDINGS_CHANNEL
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.errors import JobNotFound, NotEnded
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.outcome import Decision
from jobqueue.domain.status import Status
from jobqueue.entrypoints.config.rules import ConfigError
from jobqueue.entrypoints.producer import listens_from
from tests.support.endings import record
from tests.support.postgres import dsn

LEASE = timedelta(seconds=30)
# Long enough that only a notification can end a wait before it.
WAIT = timedelta(seconds=30)


class Watching:
    """An `EndingWatch` whose only wake-ups are the listener's."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.store = PostgresJobStore(engine)
        self.watch = EndingWatch(self.store, recheck=timedelta(hours=1))
        self.listening = asyncio.Event()

        def state(listening: bool) -> None:
            self.watch.listening(listening)
            if listening:
                self.listening.set()

        url = engine.url.render_as_string(hide_password=False)
        self.listener = Listener(
            asyncpg_connect(url), {ENDINGS_CHANNEL: self.watch.heard}, on_listening=state
        )

    async def waiting(self, job: Job) -> asyncio.Task[Job]:
        """A wait for `job`, once it has marked the job watched."""
        task = asyncio.create_task(self.watch.wait(job.id, WAIT))
        await _until_watched(self.store, job)
        return task


async def _until_watched(store: PostgresJobStore, job: Job) -> None:
    deadline = asyncio.get_running_loop().time() + 10
    while not await _watched(store, job):
        assert asyncio.get_running_loop().time() < deadline, "the wait never marked the job"
        await asyncio.sleep(0.01)


async def _watched(store: PostgresJobStore, job: Job) -> bool:
    from jobqueue.adapters.postgres.driver import fetch_pooled
    from jobqueue.adapters.postgres.statement import Statement

    rows = await fetch_pooled(
        store._engine,
        Statement("watched_of", "SELECT watched FROM jobs WHERE id = :id"),
        {"id": job.id},
    )
    return bool(rows[0]["watched"])


@pytest.fixture
async def watching(engine: AsyncEngine) -> AsyncIterator[Watching]:
    watching = Watching(engine)
    watching.listener.start()
    try:
        async with asyncio.timeout(10):
            await watching.listening.wait()
        yield watching
    finally:
        await watching.listener.aclose()


async def _claimed(store: PostgresJobStore, job_type: str = "email") -> Job:
    job = (await store.submit(NewJob.build(type=job_type, max_attempts=1))).job
    (claimed,) = await store.claim(1, LEASE, types={job_type})
    assert claimed.id == job.id
    return claimed


async def test_a_completion_wakes_the_wait_with_its_result(watching: Watching) -> None:
    claimed = await _claimed(watching.store)
    waited = await watching.waiting(claimed)

    await record(watching.store, claimed.lease, Decision.complete('{"pages": 20}'))

    async with asyncio.timeout(10):
        ended = await waited
    assert (ended.status, ended.result) == (Status.COMPLETED, {"pages": 20})


async def test_a_cancel_of_a_pending_job_wakes_the_wait(watching: Watching) -> None:
    job = (await watching.store.submit(NewJob.build(type="email", max_attempts=1))).job
    waited = await watching.waiting(job)

    await watching.store.cancel(job.id)

    async with asyncio.timeout(10):
        assert (await waited).status is Status.CANCELLED


async def test_lease_recovery_dead_lettering_a_job_wakes_the_wait(
    watching: Watching, engine: AsyncEngine
) -> None:
    job = (await watching.store.submit(NewJob.build(type="email", max_attempts=1))).job
    (claimed,) = await watching.store.claim(1, timedelta(milliseconds=1), types={"email"})
    waited = await watching.waiting(claimed)

    deadline = asyncio.get_running_loop().time() + 10
    while not await watching.store.recover_expired(10):
        assert asyncio.get_running_loop().time() < deadline, "the lease never ran out"
        await asyncio.sleep(0.01)
    async with asyncio.timeout(10):
        assert (await waited).status is Status.DEAD_LETTER
    assert job.id == claimed.id


async def test_a_deleted_job_ends_the_wait_with_job_not_found(watching: Watching) -> None:
    job = (await watching.store.submit(NewJob.build(type="email", max_attempts=1))).job
    waited = await watching.waiting(job)

    await watching.store.delete(job.id)

    async with asyncio.timeout(10):
        with pytest.raises(JobNotFound):
            await waited


async def test_a_job_that_ended_already_is_answered_at_once(watching: Watching) -> None:
    claimed = await _claimed(watching.store)
    await record(watching.store, claimed.lease, Decision.fail("no"))

    ended = await watching.watch.wait(claimed.id, WAIT)

    assert ended.status is Status.FAILED
    assert not await _watched(watching.store, claimed)


async def test_a_retry_with_backoff_does_not_end_the_wait(watching: Watching) -> None:
    job = (await watching.store.submit(NewJob.build(type="email", max_attempts=3))).job
    (claimed,) = await watching.store.claim(1, LEASE, types={"email"})
    waited = await watching.waiting(claimed)

    await record(watching.store, claimed.lease, Decision.backoff(timedelta(0), "again"))
    (again,) = await watching.store.claim(1, LEASE, types={"email"})
    assert not waited.done()
    await record(watching.store, again.lease, Decision.complete())

    async with asyncio.timeout(10):
        ended = await waited
    assert (ended.id, ended.status, ended.attempts) == (job.id, Status.COMPLETED, 2)


async def test_only_watched_jobs_endings_are_announced(
    watching: Watching, database_url: str
) -> None:
    heard: asyncio.Queue[str] = asyncio.Queue()
    connection = await asyncpg.connect(dsn(database_url))
    try:
        await connection.add_listener(ENDINGS_CHANNEL, lambda *args: heard.put_nowait(args[3]))
        unwatched = await _claimed(watching.store)
        watched = await _claimed(watching.store)
        waited = await watching.waiting(watched)

        # Committed in this order, so announced in it: the first heard is the second's.
        await record(watching.store, unwatched.lease, Decision.complete())
        await record(watching.store, watched.lease, Decision.complete())

        async with asyncio.timeout(10):
            assert await heard.get() == str(watched.id)
            await waited
        assert heard.empty()
    finally:
        await connection.close()


async def test_a_wait_answers_the_live_job_when_its_time_is_up(watching: Watching) -> None:
    job = (await watching.store.submit(NewJob.build(type="email", max_attempts=1))).job

    live = await watching.watch.wait(job.id, timedelta(milliseconds=50))

    assert live.status is Status.PENDING


async def test_closing_the_watch_answers_every_wait_at_once(watching: Watching) -> None:
    job = (await watching.store.submit(NewJob.build(type="email", max_attempts=1))).job
    waited = await watching.waiting(job)

    watching.watch.close()

    async with asyncio.timeout(10):
        assert (await waited).status is Status.PENDING
    # And a wait begun after it answers at once too: the process is stopping.
    assert (await watching.watch.wait(job.id, WAIT)).status is Status.PENDING


async def test_a_wait_without_a_listener_reads_its_job_every_recheck(
    engine: AsyncEngine,
) -> None:
    store = PostgresJobStore(engine)
    watch = EndingWatch(store, recheck=timedelta(milliseconds=20))
    claimed = await _claimed(store)
    waited = asyncio.create_task(watch.wait(claimed.id, WAIT))

    await record(store, claimed.lease, Decision.complete("[1, 2]"))

    async with asyncio.timeout(10):
        assert (await waited).result == [1, 2]


async def test_an_unknown_job_is_not_found(watching: Watching) -> None:
    with pytest.raises(JobNotFound):
        await watching.watch.wait(uuid.uuid4(), WAIT)


async def test_the_in_process_wait_answers_the_ended_job(engine: AsyncEngine) -> None:
    store = PostgresJobStore(engine)
    submitted = await jobqueue.enqueue(engine, NewJob.build(type="email", max_attempts=1))
    (claimed,) = await store.claim(1, LEASE, types={"email"})
    waited = asyncio.create_task(jobqueue.wait(engine, submitted.job.id, timeout=30))

    await _until_watched(store, claimed)
    await record(store, claimed.lease, Decision.complete('"done"'))

    async with asyncio.timeout(10):
        ended = await waited
    assert (ended.status, ended.result) == (Status.COMPLETED, "done")


async def test_the_in_process_wait_raises_not_ended_when_time_runs_out(
    engine: AsyncEngine,
) -> None:
    submitted = await jobqueue.enqueue(engine, NewJob.build(type="email", max_attempts=1))

    with pytest.raises(NotEnded) as raised:
        await jobqueue.wait(engine, submitted.job.id, timeout=0.1)

    assert raised.value.status == Status.PENDING
    assert isinstance(raised.value, TimeoutError)


async def test_the_in_process_wait_reads_every_second_where_nothing_can_listen(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fresh engine: waits are kept per engine, and this one's must not listen.
    url = engine.url.render_as_string(hide_password=False)
    quiet = create_engine(url, pool_size=2)
    monkeypatch.setenv("DATABASE_POOLER", "pgbouncer")
    try:
        store = PostgresJobStore(quiet)
        submitted = await jobqueue.enqueue(quiet, NewJob.build(type="email", max_attempts=1))
        (claimed,) = await store.claim(1, LEASE, types={"email"})
        waited = asyncio.create_task(jobqueue.wait(quiet, submitted.job.id, timeout=30))
        await _until_watched(store, claimed)
        await record(store, claimed.lease, Decision.complete("1"))

        async with asyncio.timeout(10):
            assert (await waited).result == 1
        assert waits_of(quiet, listen=False)._listener is None
    finally:
        await quiet.dispose()


def test_a_producer_listens_unless_its_environment_says_it_cannot() -> None:
    assert listens_from({})
    assert not listens_from({"DATABASE_POOLER": "pgbouncer"})
    assert not listens_from({"NOTIFY": "false"})
    with pytest.raises(ConfigError, match="NOTIFY"):
        listens_from({"NOTIFY": "perhaps"})


async def test_marking_a_pending_job_wakes_the_workers_again(
    engine: AsyncEngine, database_url: str
) -> None:
    # The mark locks the row until its commit: a claim woken by the submission meanwhile
    # passed over the job (SKIP LOCKED) and rests, unless woken again.
    store = PostgresJobStore(engine)
    heard: asyncio.Queue[str] = asyncio.Queue()
    connection = await asyncpg.connect(dsn(database_url))
    try:
        await connection.add_listener(CHANNEL, lambda *args: heard.put_nowait(args[3]))
        running = await _claimed(store)
        pending = (await store.submit(NewJob.build(type="sms", max_attempts=1))).job

        await store.watch(running.id)
        await connection.execute(f"NOTIFY {CHANNEL}, 'after the running job'")
        await store.watch(pending.id)
        await store.watch(pending.id)  # marked already: writes nothing, wakes nobody

        async with asyncio.timeout(10):
            assert [await heard.get(), await heard.get()] == ["after the running job", ""]
        await connection.execute(f"NOTIFY {CHANNEL}, 'last'")
        async with asyncio.timeout(10):
            assert await heard.get() == "last"
    finally:
        await connection.close()
