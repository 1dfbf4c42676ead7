"""Outcomes carried by claims (`OutcomeWriter.take`): endings wait for the claim on its
way and go out with it, in the context of the first that waited; a claim that fails
leaves them to the writer, and a busy pool loses none of them."""

from __future__ import annotations

import asyncio
import contextvars
from datetime import timedelta
from uuid import UUID

from jobqueue.domain.errors import StoreUnavailable
from jobqueue.domain.job import Lease
from jobqueue.domain.outcome import Decision
from jobqueue.domain.status import Status
from jobqueue.entrypoints.worker.outcomes import OutcomeWriter, WriteResult, Written
from tests.fakes import TEST_TYPES, InMemoryJobStore
from tests.support.batched_writes import BatchRecordingStore, gated_registry
from tests.unit.pool_harness import FAST, config, eventually, make_pool, running, settled, submit


async def claimed_leases(store: InMemoryJobStore, count: int) -> list[Lease]:
    for _ in range(count):
        await submit(store, "any")
    return [job.lease for job in await store.claim(count, timedelta(minutes=1), types=TEST_TYPES)]


FOREVER = lambda: float("inf")  # noqa: E731


async def turns(count: int = 5) -> None:
    """Let the event loop run a few turns: what a task started now would have done."""
    for _ in range(count):
        await asyncio.sleep(0)


async def test_endings_wait_for_the_claim_on_its_way_until_the_pool_flushes() -> None:
    store = BatchRecordingStore()
    first, second = await claimed_leases(store, 2)
    writer = OutcomeWriter(store, timedelta(seconds=5))

    assert writer.take() == []  # a claim is going out, with nothing to carry yet
    done = [writer.write(first, Decision.complete(), FOREVER)]
    await turns()
    assert store.batches == []  # left for the next claim
    carried = writer.take()
    assert [ending.lease for ending in carried] == [first]
    done.append(writer.write(second, Decision.complete(), FOREVER))
    writer.carried(carried, {first})
    assert (await done[0]).written is Written.RECORDED

    writer.flush()  # no claim coming: the writer sends the rest itself
    assert (await done[1]).written is Written.RECORDED
    assert store.batches == [[second]]


ATTEMPT = contextvars.ContextVar[str]("attempt")


async def test_a_claim_carrying_endings_gets_the_context_of_the_first_that_waited() -> None:
    store = BatchRecordingStore()
    first, second = await claimed_leases(store, 2)
    writer = OutcomeWriter(store, timedelta(seconds=5))
    assert writer.take() == []

    def write_as(name: str, lease: Lease) -> asyncio.Future[WriteResult]:
        ATTEMPT.set(name)
        return writer.write(lease, Decision.complete(), FOREVER)

    done = [
        contextvars.copy_context().run(write_as, name, lease)
        for name, lease in (("one", first), ("two", second))
    ]
    carried = writer.take()
    context = writer.taken_context()

    assert [ending.lease for ending in carried] == [first, second]
    assert context is not None
    assert context.run(ATTEMPT.get) == "one"
    assert writer.taken_context() is None  # handed over once
    writer.carried(carried, {first, second})
    assert [(await each).written for each in done] == [Written.RECORDED] * 2


async def test_endings_a_write_of_its_own_already_holds_are_not_carried() -> None:
    store = BatchRecordingStore()
    (lease,) = await claimed_leases(store, 1)
    writer = OutcomeWriter(store, timedelta(seconds=5))

    done = writer.write(lease, Decision.complete(), FOREVER)
    assert writer.take() == []
    writer.flush()
    assert (await done).written is Written.RECORDED
    assert store.batches == [[lease]]


async def test_a_carried_batch_whose_claim_failed_is_written_by_the_writer_itself() -> None:
    store = BatchRecordingStore()
    transient, refused = await claimed_leases(store, 2)
    writer = OutcomeWriter(store, timedelta(seconds=5), backoff=FAST.backoff)

    writer.take()
    done = writer.write(transient, Decision.complete(), FOREVER)
    carried = writer.take()
    writer.carry_failed(carried, StoreUnavailable("the job store failed: connection reset"))
    # Retrying with backoff: a claim going out now carries nothing.
    assert writer.take() == []
    result = await done
    assert (result.written, result.tries) == (Written.RECORDED, 2)

    writer.flush()
    done = writer.write(refused, Decision.complete(), FOREVER)
    carried = writer.take()
    assert carried == []  # the write of its own started at once: the claim was not coming
    assert (await done).written is Written.RECORDED


async def test_a_carried_batch_the_store_refuses_is_left_to_recovery() -> None:
    store = BatchRecordingStore()
    (lease,) = await claimed_leases(store, 1)
    writer = OutcomeWriter(store, timedelta(seconds=5))

    writer.take()
    done = writer.write(lease, Decision.complete(), FOREVER)
    writer.carry_failed(writer.take(), ValueError("a statement the store refuses"))
    result = await done
    assert (result.written, result.tries) == (Written.UNRECORDED, 1)
    assert store.batches == []


async def test_a_busy_pool_carries_its_outcomes_on_its_claims() -> None:
    store = BatchRecordingStore()
    jobs = [await submit(store, "quick") for _ in range(300)]
    pool = make_pool(store, gated_registry(asyncio.Event(), []), config(workers=4))

    async with running(pool):
        for job in jobs:
            await settled(store, job)

    assert store.record_and_claim_calls > 0
    assert {(j.status, j.attempts) for j in store.jobs()} == {(Status.COMPLETED, 1)}
    # Every ending written exactly once, carried or not.
    written = [lease.job_id for batch in store.batches for lease in batch]
    assert sorted(written) == sorted(job.id for job in jobs)


async def test_a_failing_claim_that_carried_endings_loses_none_of_them() -> None:
    store = BatchRecordingStore()
    store.failures_left = 3
    jobs = [await submit(store, "quick") for _ in range(100)]
    pool = make_pool(store, gated_registry(asyncio.Event(), []), config(workers=4))

    async with running(pool):
        for job in jobs:
            await settled(store, job)

    assert store.failures_left == 0
    assert {(j.status, j.attempts) for j in store.jobs()} == {(Status.COMPLETED, 1)}


async def test_an_ending_left_for_a_claim_is_written_when_no_claim_follows() -> None:
    # The poll interval is far beyond the test's deadline: were the ending left waiting
    # for a claim that the pool has no reason to send, the job would never settle.
    store = BatchRecordingStore()
    gate = asyncio.Event()
    entered: list[UUID] = []
    jobs = [await submit(store, "gated") for _ in range(3)]
    pool_config = config(workers=2, poll_interval=timedelta(hours=1))
    pool = make_pool(store, gated_registry(gate, entered), pool_config)

    async with running(pool):
        await eventually(lambda: len(entered) == 2, "both workers busy")
        gate.set()
        for job in jobs:
            await settled(store, job)
