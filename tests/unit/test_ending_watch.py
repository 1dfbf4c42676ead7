"""`EndingWatch` over the fake store: a notification wakes only its job's waits, a
missed spell or the listener's return wakes every wait to read its job again, a
notification naming no job is ignored, and without a listener waits read their job
every recheck. (Against PostgreSQL and its triggers: test_waits_postgres.py.)"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest

from jobqueue.adapters.postgres.endings import MAX_WAIT, EndingWatch
from jobqueue.adapters.postgres.notify import MISSED
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.outcome import Decision
from jobqueue.domain.status import Status
from tests.fakes import InMemoryJobStore
from tests.support.endings import record
from tests.unit.pool_harness import eventually

LEASE = timedelta(minutes=5)
LONG = timedelta(seconds=30)


async def _claimed(store: InMemoryJobStore) -> Job:
    await store.submit(NewJob(type="t", max_attempts=3))
    (job,) = await store.claim(1, LEASE, types={"t"})
    return job


async def _waiting(watch: EndingWatch, store: InMemoryJobStore, job: Job) -> asyncio.Task[Job]:
    task = asyncio.create_task(watch.wait(job.id, LONG))
    await eventually(lambda: job.id in store.watched, "the wait marked its job")
    # Past its first read (the fake store answers at once): asleep until woken.
    for _ in range(5):
        await asyncio.sleep(0)
    return task


async def test_a_notification_wakes_only_the_waits_of_its_job() -> None:
    store = InMemoryJobStore()
    watch = EndingWatch(store, recheck=timedelta(hours=1))
    watch.listening(True)
    one, other = await _claimed(store), await _claimed(store)
    waits = [await _waiting(watch, store, one), await _waiting(watch, store, other)]
    await record(store, one.lease, Decision.complete('"a"'))
    await record(store, other.lease, Decision.complete('"b"'))

    watch.heard(str(one.id))

    assert (await asyncio.wait_for(waits[0], 5)).result == "a"
    await asyncio.sleep(0.01)
    assert not waits[1].done()
    watch.heard(MISSED)
    assert (await asyncio.wait_for(waits[1], 5)).result == "b"


async def test_the_listener_coming_back_wakes_every_wait() -> None:
    store = InMemoryJobStore()
    watch = EndingWatch(store, recheck=timedelta(hours=1))
    watch.listening(True)
    job = await _claimed(store)
    waited = await _waiting(watch, store, job)
    watch.listening(False)
    await record(store, job.lease, Decision.complete())

    watch.listening(True)

    assert (await asyncio.wait_for(waited, 5)).status is Status.COMPLETED


async def test_without_a_listener_a_wait_reads_its_job_every_recheck() -> None:
    store = InMemoryJobStore()
    watch = EndingWatch(store, recheck=timedelta(milliseconds=10))
    job = await _claimed(store)
    waited = await _waiting(watch, store, job)

    await record(store, job.lease, Decision.complete())

    assert (await asyncio.wait_for(waited, 5)).status is Status.COMPLETED
    assert watch.waiting == 0


def test_a_notification_naming_no_job_is_ignored(caplog: pytest.LogCaptureFixture) -> None:
    watch = EndingWatch(InMemoryJobStore(), recheck=timedelta(seconds=1))
    caplog.set_level(logging.WARNING, "jobqueue.waits")

    watch.heard("not-a-uuid")

    assert "names no job" in caplog.text


async def test_a_wait_longer_than_the_longest_is_refused() -> None:
    watch = EndingWatch(InMemoryJobStore(), recheck=timedelta(seconds=1))
    job = await _claimed(InMemoryJobStore())

    with pytest.raises(ValueError, match="a wait lasts from 0"):
        await watch.wait(job.id, MAX_WAIT + timedelta(seconds=1))
