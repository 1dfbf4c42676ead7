"""Batched endings and renewals: many attempts' outcomes (or leases) in one write, each
fenced by its own lease."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import timedelta

from jobqueue.domain.job import Lease
from jobqueue.domain.outcome import Decision
from jobqueue.domain.ports import JobStore
from jobqueue.domain.status import Status
from jobqueue.domain.transitions import Operation, sources
from tests.contract.steps import (
    LEASE,
    SHORT_LEASE,
    claim_only,
    eventually,
    job_in,
    only_target,
    submit,
)
from tests.support.endings import complete_many


async def test_complete_many_completes_every_held_job_and_returns_their_leases(
    store: JobStore,
) -> None:
    held = [await job_in(store, Status.PROCESSING) for _ in range(3)]

    completed = await complete_many(store, [job.lease for job in held])

    assert completed == {job.lease for job in held}
    for job in held:
        written = await store.get(job.id)
        assert written.status is only_target(Operation.COMPLETE, Status.PROCESSING)
        assert written.locked_until is None
        # The same record a single `complete` leaves: token, attempts and due time kept.
        assert (written.attempts, written.lease_token, written.run_at) == (
            job.attempts,
            job.lease_token,
            job.run_at,
        )
        assert written.updated_at >= job.updated_at


async def test_stale_lease_in_a_batch_is_refused_while_the_others_complete(
    store: JobStore,
) -> None:
    held = await job_in(store, Status.PROCESSING)
    # Claimed, lost to recovery, claimed again: the first claim's lease is stale.
    contested = await submit(store)
    stale = await claim_only(store, contested, SHORT_LEASE)
    await eventually(lambda: store.recover_expired(10), "the short lease to be recovered")
    newer = await claim_only(store, contested)

    completed = await complete_many(store, [held.lease, stale.lease])

    assert completed == {held.lease}
    assert (await store.get(held.id)).status is Status.COMPLETED
    # The newer claim still holds the job, and can still record its own outcome.
    assert await store.get(newer.id) == newer
    assert await complete_many(store, [newer.lease]) == {newer.lease}


async def test_complete_many_refuses_jobs_not_processing_and_unknown_ids(store: JobStore) -> None:
    held = await job_in(store, Status.PROCESSING)
    # Pending last: each job_in claims the one job it made, so none may be left due.
    refusing = [
        Status.COMPLETED,
        Status.FAILED,
        Status.DEAD_LETTER,
        Status.CANCELLED,
        Status.WAITING,
        Status.PENDING,
    ]
    assert set(refusing) == set(Status) - sources(Operation.COMPLETE)
    others = [await job_in(store, status) for status in refusing]
    unknown = Lease(uuid.uuid4(), 1)
    never_taken = replace(held.lease, token=held.lease_token + 1)

    completed = await complete_many(
        store, [unknown, never_taken, *(job.lease for job in others), held.lease]
    )

    assert completed == {held.lease}
    for job in others:
        assert await store.get(job.id) == job


async def test_complete_many_of_no_leases_writes_nothing(store: JobStore) -> None:
    held = await job_in(store, Status.PROCESSING)

    assert await complete_many(store, []) == set()
    assert await store.get(held.id) == held


async def test_stale_and_current_lease_of_one_job_in_one_batch_complete_only_the_current(
    store: JobStore,
) -> None:
    # The attempt that lost its lease and the one that took the job over can finish in
    # the same moment and land in one batch: only the current lease may count.
    contested = await submit(store)
    stale = await claim_only(store, contested, SHORT_LEASE)
    await eventually(lambda: store.recover_expired(10), "the short lease to be recovered")
    newer = await claim_only(store, contested)

    completed = await complete_many(store, [stale.lease, newer.lease])

    assert completed == {newer.lease}
    assert (await store.get(newer.id)).status is Status.COMPLETED


async def test_a_batch_mixing_every_ending_writes_each_as_decided(store: JobStore) -> None:
    # The pool's writer sends whatever ended together in one statement.
    delay = timedelta(seconds=30)
    decisions = [
        Decision.complete(),
        Decision.backoff(delay, "flaky"),
        Decision.fail("bad input"),
        Decision.dead_letter("gave up"),
        Decision.release(),
    ]
    held = [await job_in(store, Status.PROCESSING) for _ in decisions]
    stale = Lease(held[0].id, held[0].lease_token - 1)

    written = await store.record_many(
        [(job.lease, decision) for job, decision in zip(held, decisions, strict=True)]
        + [(stale, Decision.fail("stale"))]
    )

    assert written == {job.lease for job in held}
    for job, decision in zip(held, decisions, strict=True):
        now = await store.get(job.id)
        assert now.status is only_target(decision.operation, Status.PROCESSING)
        assert now.locked_until is None
        assert now.last_error == decision.error
        assert now.attempts == (0 if decision.gives_back_attempt else job.attempts)
        if decision.delay is not None:
            assert now.run_at == now.updated_at + decision.delay
        else:
            assert now.run_at == job.run_at


async def test_renew_extends_held_leases_and_returns_only_those(store: JobStore) -> None:
    held = await job_in(store, Status.PROCESSING)
    done = await job_in(store, Status.COMPLETED)

    # Twice the claim's lease: the new expiry, from the store's clock now, lies past the old.
    renewed = await store.renew([held.lease, done.lease, Lease(uuid.uuid4(), 1)], LEASE * 2)

    assert renewed == {held.lease}
    now = await store.get(held.id)
    assert now.locked_until is not None
    assert held.locked_until is not None
    assert now.locked_until > held.locked_until
    assert (now.status, now.lease_token, now.attempts) == (
        Status.PROCESSING,
        held.lease_token,
        held.attempts,
    )
