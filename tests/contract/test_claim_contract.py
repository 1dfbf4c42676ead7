"""Claiming: which jobs a claim takes, in what order, and what it writes."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from jobqueue.domain.job import Job
from jobqueue.domain.outcome import Decision
from jobqueue.domain.ports import JobStore
from jobqueue.domain.status import Status
from jobqueue.domain.transitions import Operation, sources
from tests.contract.steps import (
    LEASE,
    claim_only,
    eventually,
    job_in,
    new_job,
    only_target,
    store_time_after,
    submit,
)
from tests.fakes import TEST_TYPES
from tests.support.endings import record


async def test_claim_leases_a_due_job_and_counts_the_attempt(store: JobStore) -> None:
    job = (await store.submit(new_job(key="k"))).job

    [claimed] = await store.claim(5, LEASE, types=TEST_TYPES)

    assert claimed.id == job.id
    assert claimed.status is only_target(Operation.CLAIM, Status.PENDING)
    assert (claimed.attempts, claimed.lease_token) == (1, 1)
    assert claimed.updated_at >= job.created_at
    # The lease runs from the claim, by the store's clock.
    assert claimed.locked_until == claimed.updated_at + LEASE
    unchanged = ("type", "payload", "max_attempts", "run_at", "idempotency_key", "traceparent")
    assert {name: getattr(claimed, name) for name in unchanged} == {
        name: getattr(job, name) for name in unchanged
    }
    assert await store.get(job.id) == claimed


async def test_claim_takes_at_most_limit_jobs(store: JobStore) -> None:
    submitted = {(await submit(store)).id for _ in range(3)}

    first = await store.claim(2, LEASE, types=TEST_TYPES)
    second = await store.claim(2, LEASE, types=TEST_TYPES)

    assert len(first) == 2
    assert len(second) == 1
    assert {job.id for job in [*first, *second]} == submitted
    assert await store.claim(2, LEASE, types=TEST_TYPES) == []


async def test_claim_takes_jobs_in_run_at_order_not_creation_order(store: JobStore) -> None:
    older = await submit(store, job_type="older")
    older_claim = await claim_only(store, older)
    newer = await submit(store, job_type="newer")
    # Retried after `newer` was created, `older` is now due after it.
    retried = await record(
        store, older_claim.lease, Decision.backoff(timedelta(milliseconds=1), "again")
    )
    assert retried.run_at > newer.run_at
    await store_time_after(store, retried.run_at)

    # One at a time, so each claim must pick the earliest due job of those left.
    order: list[str] = []
    while batch := await store.claim(1, LEASE, types=TEST_TYPES):
        order.extend(job.type for job in batch)

    assert [name for name in order if name != "clock-probe"] == ["newer", "older"]


async def test_claim_returns_its_jobs_in_run_at_order(store: JobStore) -> None:
    for _ in range(5):
        await submit(store)

    claimed = await store.claim(5, LEASE, types=TEST_TYPES)

    assert len(claimed) == 5
    assert [job.run_at for job in claimed] == sorted(job.run_at for job in claimed)


async def test_claim_passes_over_a_job_that_is_not_due_yet(store: JobStore) -> None:
    later = await claim_only(store, await submit(store, job_type="later"))
    await record(store, later.lease, Decision.backoff(timedelta(hours=1), "try again in an hour"))
    due = await submit(store, job_type="due")

    claimed = await store.claim(10, LEASE, types=TEST_TYPES)

    assert [job.id for job in claimed] == [due.id]
    assert (await store.get(later.id)).status is Status.PENDING


async def test_job_retried_with_a_delay_is_claimed_only_once_due(store: JobStore) -> None:
    first = await claim_only(store, await submit(store))
    delay = timedelta(milliseconds=200)

    retried = await record(store, first.lease, Decision.backoff(delay, "flaky"))
    assert retried.run_at == retried.updated_at + delay

    async def claim_it() -> list[Job]:
        return [job for job in await store.claim(10, LEASE, types=TEST_TYPES) if job.id == first.id]

    [again] = await eventually(claim_it, "the retried job to be claimable")
    # The claim that took it ran at or after its due time, by the store's clock.
    assert again.updated_at >= retried.run_at
    assert (again.attempts, again.lease_token) == (2, 2)


async def test_nothing_due_claims_nothing(store: JobStore) -> None:
    assert await store.claim(10, LEASE, types=TEST_TYPES) == []


@pytest.mark.parametrize("status", list(Status))
async def test_claim_takes_a_job_only_from_the_statuses_the_domain_allows(
    store: JobStore, status: Status
) -> None:
    job = await job_in(store, status)

    claimed = await store.claim(10, LEASE, types=TEST_TYPES)

    if status in sources(Operation.CLAIM):
        assert [each.id for each in claimed] == [job.id]
        assert claimed[0].status is only_target(Operation.CLAIM, status)
    else:
        assert claimed == []
        assert await store.get(job.id) == job


async def test_concurrent_claims_never_hand_out_the_same_job(store: JobStore) -> None:
    submitted = {(await submit(store)).id for _ in range(10)}

    batches = await asyncio.gather(*(store.claim(3, LEASE, types=TEST_TYPES) for _ in range(4)))
    claimed = [job.id for batch in batches for job in batch]
    # A claimer may skip rows another one holds; whatever is left is still claimable.
    rest = [job.id for job in await store.claim(10, LEASE, types=TEST_TYPES)]

    assert len(claimed) == len(set(claimed))
    assert sorted([*claimed, *rest]) == sorted(submitted)


@pytest.mark.parametrize(
    ("limit", "lease"),
    [(0, LEASE), (-1, LEASE), (1, timedelta(0)), (1, timedelta(seconds=-1))],
    ids=["zero-limit", "negative-limit", "zero-lease", "negative-lease"],
)
async def test_claim_refuses_a_limit_or_lease_that_makes_no_sense(
    store: JobStore, limit: int, lease: timedelta
) -> None:
    job = await submit(store)

    with pytest.raises(ValueError, match="must be"):
        await store.claim(limit, lease, types=TEST_TYPES)

    assert await store.get(job.id) == job
