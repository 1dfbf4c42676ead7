"""Lease recovery: a job whose lease ran out goes back to pending, or to dead_letter.

Leases here last 50 ms; the tests poll `recover_expired` until it answers, so they wait
no longer than the lease needs and never guess how long that is.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from jobqueue.domain.job import Job
from jobqueue.domain.outcome import LEASE_EXPIRED_ERROR
from jobqueue.domain.ports import JobStore
from jobqueue.domain.status import Status
from jobqueue.domain.transitions import Operation, targets
from tests.contract.steps import LEASE, SHORT_LEASE, claim_only, eventually, submit
from tests.fakes import TEST_TYPES


async def _recovered(store: JobStore, limit: int = 10) -> Sequence[Job]:
    return await eventually(lambda: store.recover_expired(limit), "an expired lease")


async def test_expired_lease_with_attempts_left_goes_back_to_pending(store: JobStore) -> None:
    claimed = await claim_only(store, await submit(store, max_attempts=3), lease=SHORT_LEASE)

    [recovered] = await _recovered(store)

    assert recovered.id == claimed.id
    assert recovered.status is Status.PENDING
    assert recovered.status in targets(Operation.RECOVER, Status.PROCESSING)
    # The lost attempt counts: it was counted when the job was claimed.
    assert (recovered.attempts, recovered.lease_token) == (1, claimed.lease_token)
    assert (recovered.locked_until, recovered.last_error) == (None, LEASE_EXPIRED_ERROR)
    # Recovered only once the lease had run out, and due again at once.
    assert claimed.locked_until is not None
    assert recovered.updated_at > claimed.locked_until
    assert recovered.run_at == recovered.updated_at
    assert await store.get(claimed.id) == recovered
    again = await claim_only(store, recovered)
    assert (again.attempts, again.lease_token) == (2, 2)


async def test_expired_lease_on_the_last_attempt_is_dead_lettered(store: JobStore) -> None:
    claimed = await claim_only(store, await submit(store, max_attempts=1), lease=SHORT_LEASE)

    [recovered] = await _recovered(store)

    assert recovered.status is Status.DEAD_LETTER
    assert recovered.status in targets(Operation.RECOVER, Status.PROCESSING)
    assert (recovered.attempts, recovered.locked_until) == (1, None)
    assert recovered.last_error == LEASE_EXPIRED_ERROR
    assert recovered.run_at == claimed.run_at
    assert await store.claim(10, LEASE, types=TEST_TYPES) == []
    # Dead-lettered like any other: a operator retry brings it back.
    assert (await store.retry(claimed.id)).status is Status.PENDING


async def test_live_leases_are_left_alone(store: JobStore) -> None:
    held = await claim_only(store, await submit(store, job_type="held"), lease=LEASE)
    expiring = await claim_only(store, await submit(store, job_type="expiring"), lease=SHORT_LEASE)

    recovered = await _recovered(store)

    assert [job.id for job in recovered] == [expiring.id]
    assert await store.get(held.id) == held
    assert await store.recover_expired(10) == []


async def test_recovery_takes_at_most_limit_jobs(store: JobStore) -> None:
    for _ in range(3):
        await submit(store)
    claimed = await store.claim(3, SHORT_LEASE, types=TEST_TYPES)
    # One claim, one lease end: once one of them has expired, all three have.
    assert len({job.locked_until for job in claimed}) == 1

    first = await _recovered(store, limit=1)
    second = await store.recover_expired(2)

    assert len(first) == 1
    assert len(second) == 2
    assert {job.id for job in [*first, *second]} == {job.id for job in claimed}
    assert await store.recover_expired(10) == []


async def test_nothing_expired_recovers_nothing(store: JobStore) -> None:
    await claim_only(store, await submit(store))
    await submit(store)

    assert await store.recover_expired(10) == []


@pytest.mark.parametrize("limit", [0, -1])
async def test_recovery_refuses_a_limit_below_one(store: JobStore, limit: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        await store.recover_expired(limit)
