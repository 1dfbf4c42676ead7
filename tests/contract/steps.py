"""Steps that drive any `JobStore` through its port only: no SQL, no fake internals.

Time is the store's own: a job's `updated_at` is the store's clock at the operation that
wrote it, so expectations are stated against it rather than against this process's
clock, and waiting for a lease or a delay to run out is polling with a deadline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TypeVar

from jobqueue.domain.fields import JsonValue
from jobqueue.domain.job import Job, Lease, NewJob
from jobqueue.domain.outcome import Decision
from jobqueue.domain.ports import JobStore
from jobqueue.domain.status import Status
from jobqueue.domain.transitions import Operation, targets
from tests.fakes import TEST_TYPES
from tests.support.endings import record

T = TypeVar("T")

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
LEASE = timedelta(minutes=5)
# Short enough that waiting for expiry costs little, long enough to be a real lease.
SHORT_LEASE = timedelta(milliseconds=50)
DEADLINE_SECONDS = 30.0
POLL_SECONDS = 0.01

OutcomeWrite = Callable[[JobStore, Lease], Awaitable[Job]]

RETRY_DELAY = timedelta(seconds=30)
SNOOZE_DELAY = timedelta(seconds=45)
RETRY_ERROR = "flaky: connection reset"
FAIL_ERROR = "bad input: no such account"
DEAD_LETTER_ERROR = "gave up after the last attempt"

# The lease-fenced outcome writes, and the error text each one records.
OUTCOME_WRITES: dict[Operation, OutcomeWrite] = {
    Operation.COMPLETE: lambda store, lease: record(store, lease, Decision.complete()),
    Operation.BACKOFF: lambda store, lease: record(
        store, lease, Decision.backoff(RETRY_DELAY, RETRY_ERROR)
    ),
    Operation.FAIL: lambda store, lease: record(store, lease, Decision.fail(FAIL_ERROR)),
    Operation.DEAD_LETTER: lambda store, lease: record(
        store, lease, Decision.dead_letter(DEAD_LETTER_ERROR)
    ),
    Operation.RELEASE: lambda store, lease: record(store, lease, Decision.release()),
    Operation.SNOOZE: lambda store, lease: record(store, lease, Decision.snooze(SNOOZE_DELAY)),
}
OUTCOME_ERRORS: dict[Operation, str | None] = {
    Operation.COMPLETE: None,
    Operation.BACKOFF: RETRY_ERROR,
    Operation.FAIL: FAIL_ERROR,
    Operation.DEAD_LETTER: DEAD_LETTER_ERROR,
    Operation.RELEASE: None,
    Operation.SNOOZE: None,
}


# The type of the job a waiting job of `job_in` waits for.
BLOCKER = "blocker"


def new_job(
    payload: JsonValue = None,
    *,
    job_type: str = "email",
    max_attempts: int = 3,
    key: str | None = None,
    traceparent: str | None = TRACEPARENT,
) -> NewJob:
    return NewJob(
        type=job_type,
        max_attempts=max_attempts,
        payload={"to": "a@example.com"} if payload is None else payload,
        idempotency_key=key,
        traceparent=traceparent,
    )


def only_target(operation: Operation, source: Status) -> Status:
    """The one status the domain lets `operation` reach from `source`."""
    (target,) = targets(operation, source)
    return target


async def submit(store: JobStore, *, job_type: str = "email", max_attempts: int = 3) -> Job:
    return (await store.submit(new_job(job_type=job_type, max_attempts=max_attempts))).job


async def claim_only(store: JobStore, expected: Job, lease: timedelta = LEASE) -> Job:
    """Claim, insisting that exactly `expected` comes back."""
    claimed = await store.claim(10, lease, types=TEST_TYPES)
    assert [job.id for job in claimed] == [expected.id]
    return claimed[0]


async def job_in(store: JobStore, status: Status, *, max_attempts: int = 3) -> Job:
    """A job in `status`, reached through the port, whose current lease token is the one
    its last claim took, so that only the status can make a fenced write refuse it."""
    if status is Status.WAITING:
        # Waiting for a job no test claims (its type is none of theirs).
        blocker = (await store.submit(new_job(job_type=BLOCKER))).job
        waiting = new_job(max_attempts=max_attempts)
        return (await store.submit(replace(waiting, depends_on=(blocker.id,)))).job
    job = await submit(store, max_attempts=max_attempts)
    if status is Status.PENDING:
        # Claimed and released: pending, yet holding the token of its last claim.
        return await record(store, (await claim_only(store, job)).lease, Decision.release())
    claimed = await claim_only(store, job)
    if status is Status.PROCESSING:
        return claimed
    if status is Status.CANCELLED:
        # Cancelled while it ran: the cancel ended the lease its claim took.
        return await store.cancel(claimed.id)
    operation = {
        Status.COMPLETED: Operation.COMPLETE,
        Status.FAILED: Operation.FAIL,
        Status.DEAD_LETTER: Operation.DEAD_LETTER,
    }[status]
    return await OUTCOME_WRITES[operation](store, claimed.lease)


async def eventually(probe: Callable[[], Awaitable[T | None]], what: str) -> T:
    """Poll `probe` until it returns something; fail after a generous deadline."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        found = await probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {DEADLINE_SECONDS}s waiting for {what}")
        await asyncio.sleep(POLL_SECONDS)


async def store_time_after(store: JobStore, moment: datetime) -> datetime:
    """Wait until the store's clock has passed `moment`; return the time it read.

    The store's clock is read through the port: the creation time of a throwaway job of
    type `clock-probe`. Those jobs are due at once, earlier ones before `moment`: tests
    using this must pass over them when they claim.
    """

    async def read() -> datetime | None:
        probe = await submit(store, job_type="clock-probe")
        return probe.created_at if probe.created_at > moment else None

    return await eventually(read, f"the store's clock to pass {moment}")
