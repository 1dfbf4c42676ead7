"""Outcome writes, their lease fencing, operator retry: the state machine through the port.

Which operation may start from which status, and where it leads, is read from the
domain's `TRANSITIONS` (through `sources`/`targets`), never restated here.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta

import pytest

from jobqueue.domain.errors import InvalidTransition, JobNotFound, LeaseLost
from jobqueue.domain.job import Job, Lease
from jobqueue.domain.outcome import MAX_ERROR_LENGTH, Decision
from jobqueue.domain.ports import JobStore
from jobqueue.domain.status import Status
from jobqueue.domain.transitions import Operation, sources, targets
from tests.contract.steps import (
    OUTCOME_ERRORS,
    OUTCOME_WRITES,
    RETRY_DELAY,
    SHORT_LEASE,
    SNOOZE_DELAY,
    claim_only,
    eventually,
    job_in,
    only_target,
    submit,
)
from tests.support.endings import record

OUTCOMES = list(OUTCOME_WRITES)
OUTCOME_IDS = [operation.value for operation in OUTCOMES]

# --- what each outcome write records ---------------------------------------------------


@pytest.mark.parametrize("operation", OUTCOMES, ids=OUTCOME_IDS)
async def test_outcome_write_records_its_status_and_ends_the_lease(
    store: JobStore, operation: Operation
) -> None:
    claimed = await job_in(store, Status.PROCESSING)

    written = await OUTCOME_WRITES[operation](store, claimed.lease)

    assert written.status is only_target(operation, Status.PROCESSING)
    assert written.locked_until is None
    assert written.last_error == OUTCOME_ERRORS[operation]
    # Only a release and a snooze give the attempt back; the token stays until the next
    # claim.
    expected_attempts = 0 if operation in (Operation.RELEASE, Operation.SNOOZE) else 1
    assert (written.attempts, written.lease_token) == (expected_attempts, claimed.lease_token)
    assert written.updated_at >= claimed.updated_at
    assert await store.get(claimed.id) == written


@pytest.mark.parametrize(
    ("operation", "due_after"),
    [
        (Operation.BACKOFF, RETRY_DELAY),
        (Operation.RELEASE, timedelta(0)),
        (Operation.SNOOZE, SNOOZE_DELAY),
    ],
    ids=["retry", "release", "snooze"],
)
async def test_job_sent_back_to_pending_is_due_after_its_delay_by_the_store_clock(
    store: JobStore, operation: Operation, due_after: timedelta
) -> None:
    claimed = await job_in(store, Status.PROCESSING)

    written = await OUTCOME_WRITES[operation](store, claimed.lease)

    assert written.run_at == written.updated_at + due_after


@pytest.mark.parametrize(
    "operation", [Operation.COMPLETE, Operation.FAIL, Operation.DEAD_LETTER], ids=str
)
async def test_finishing_a_job_leaves_its_due_time_alone(
    store: JobStore, operation: Operation
) -> None:
    claimed = await job_in(store, Status.PROCESSING)

    written = await OUTCOME_WRITES[operation](store, claimed.lease)

    assert written.run_at == claimed.run_at


async def test_retry_with_no_delay_is_due_at_once(store: JobStore) -> None:
    claimed = await job_in(store, Status.PROCESSING)

    retried = await record(store, claimed.lease, Decision.backoff(timedelta(0), "again"))

    again = await claim_only(store, retried)
    assert (again.attempts, again.lease_token) == (2, 2)


async def test_released_job_gives_its_attempt_back_and_is_claimable_at_once(
    store: JobStore,
) -> None:
    claimed = await job_in(store, Status.PROCESSING, max_attempts=1)

    released = await record(store, claimed.lease, Decision.release())
    again = await claim_only(store, released)

    assert (released.status, released.attempts) == (Status.PENDING, 0)
    # The same attempt number, a newer claim.
    assert (again.attempts, again.lease_token) == (1, 2)


@pytest.mark.parametrize(
    ("error", "recorded"),
    [
        ("Traceback (most recent call last):\n  ...\nValueError: ü ✓ 東京", None),
        # Clipped by the decision (domain), stored whole from there.
        ("x" * 100_000, "x" * (MAX_ERROR_LENGTH - 1) + "…"),
        ("NUL \x00 inside", "NUL \\x00 inside"),
        ("lone \ud800 surrogate", "lone \\ud800 surrogate"),
    ],
    ids=["multiline-unicode", "long", "nul", "lone-surrogate"],
)
@pytest.mark.parametrize(
    "write",
    [
        lambda store, lease, error: record(store, lease, Decision.backoff(timedelta(0), error)),
        lambda store, lease, error: record(store, lease, Decision.fail(error)),
        lambda store, lease, error: record(store, lease, Decision.dead_letter(error)),
    ],
    ids=["retry", "fail", "dead_letter"],
)
async def test_any_error_text_is_recorded_readably(
    store: JobStore,
    write: Callable[[JobStore, Lease, str], Awaitable[Job]],
    error: str,
    recorded: str | None,
) -> None:
    # Error texts come from whatever a handler raised; a character the database cannot
    # hold must not cost the outcome, so it is recorded as a visible escape.
    claimed = await job_in(store, Status.PROCESSING)

    written = await write(store, claimed.lease, error)

    expected = error if recorded is None else recorded
    assert written.last_error == expected
    assert (await store.get(claimed.id)).last_error == expected


async def test_retry_refuses_a_negative_delay_and_keeps_the_lease(store: JobStore) -> None:
    claimed = await job_in(store, Status.PROCESSING)

    with pytest.raises(ValueError, match="must not be negative"):
        await record(store, claimed.lease, Decision.backoff(timedelta(seconds=-1), "back in time"))

    assert await store.get(claimed.id) == claimed
    assert (await record(store, claimed.lease, Decision.complete())).status is Status.COMPLETED


# --- which statuses accept which write ---------------------------------------------------


@pytest.mark.parametrize("status", list(Status))
@pytest.mark.parametrize("operation", OUTCOMES, ids=OUTCOME_IDS)
async def test_outcome_write_applies_exactly_from_the_statuses_the_domain_allows(
    store: JobStore, operation: Operation, status: Status
) -> None:
    # The job holds the token of its last claim, so only its status can refuse the write.
    job = await job_in(store, status)

    if status in sources(operation):
        written = await OUTCOME_WRITES[operation](store, job.lease)
        assert written.status in targets(operation, status)
    else:
        with pytest.raises(LeaseLost):
            await OUTCOME_WRITES[operation](store, job.lease)
        assert await store.get(job.id) == job


@pytest.mark.parametrize("status", list(Status))
async def test_operator_retry_applies_exactly_from_the_statuses_the_domain_allows(
    store: JobStore, status: Status
) -> None:
    job = await job_in(store, status)

    if status in sources(Operation.RETRY):
        retried = await store.retry(job.id)
        assert retried.status in targets(Operation.RETRY, status)
    else:
        with pytest.raises(InvalidTransition) as raised:
            await store.retry(job.id)
        assert (raised.value.job_id, raised.value.status) == (job.id, status)
        assert await store.get(job.id) == job


# --- operator retry --------------------------------------------------------------------------


async def test_operator_retry_gives_a_fresh_attempt_budget_and_keeps_the_token_growing(
    store: JobStore,
) -> None:
    dead = await job_in(store, Status.DEAD_LETTER, max_attempts=1)

    retried = await store.retry(dead.id)
    again = await claim_only(store, retried)

    assert retried.status is only_target(Operation.RETRY, Status.DEAD_LETTER)
    assert (retried.attempts, retried.lease_token, retried.locked_until) == (0, 1, None)
    assert retried.run_at == retried.updated_at
    # Why it was dead-lettered stays readable until the next outcome replaces it.
    assert retried.last_error == dead.last_error
    assert (again.attempts, again.lease_token) == (1, 2)


async def test_operator_retry_of_an_unknown_job_is_not_found(store: JobStore) -> None:
    missing = uuid.uuid4()

    with pytest.raises(JobNotFound) as raised:
        await store.retry(missing)

    assert raised.value.job_id == missing


# --- fencing: a stale lease never writes -------------------------------------------------


async def _released_and_reclaimed(store: JobStore) -> tuple[Lease, Job]:
    first = await job_in(store, Status.PROCESSING)
    await record(store, first.lease, Decision.release())
    return first.lease, await claim_only(store, first)


async def _manually_retried_and_reclaimed(store: JobStore) -> tuple[Lease, Job]:
    # Attempt numbers repeat after a operator retry: only the token tells the claims apart.
    first = await job_in(store, Status.PROCESSING, max_attempts=1)
    await record(store, first.lease, Decision.dead_letter("gave up"))
    await store.retry(first.id)
    newer = await claim_only(store, first)
    assert newer.attempts == first.attempts
    return first.lease, newer


async def _recovered_and_reclaimed(store: JobStore) -> tuple[Lease, Job]:
    first = await claim_only(store, await submit(store), lease=SHORT_LEASE)
    await eventually(lambda: store.recover_expired(10), "the short lease to be recovered")
    return first.lease, await claim_only(store, first)


SUPERSEDED: dict[str, Callable[[JobStore], Awaitable[tuple[Lease, Job]]]] = {
    "released-and-reclaimed": _released_and_reclaimed,
    "manually-retried-and-reclaimed": _manually_retried_and_reclaimed,
    "recovered-and-reclaimed": _recovered_and_reclaimed,
}


@pytest.mark.parametrize("scenario", list(SUPERSEDED))
@pytest.mark.parametrize("operation", OUTCOMES, ids=OUTCOME_IDS)
async def test_stale_lease_cannot_overwrite_a_newer_claim(
    store: JobStore, operation: Operation, scenario: str
) -> None:
    stale, newer = await SUPERSEDED[scenario](store)

    with pytest.raises(LeaseLost) as raised:
        await OUTCOME_WRITES[operation](store, stale)

    assert (raised.value.job_id, raised.value.lease_token) == (stale.job_id, stale.token)
    assert await store.get(newer.id) == newer
    # The newer claim still owns the job, and its outcome lands.
    assert (await record(store, newer.lease, Decision.complete())).status is Status.COMPLETED


@pytest.mark.parametrize("operation", OUTCOMES, ids=OUTCOME_IDS)
async def test_lease_that_was_never_taken_is_lost(store: JobStore, operation: Operation) -> None:
    claimed = await job_in(store, Status.PROCESSING)
    ahead = Lease(claimed.id, claimed.lease_token + 1)

    with pytest.raises(LeaseLost):
        await OUTCOME_WRITES[operation](store, ahead)

    assert await store.get(claimed.id) == claimed


@pytest.mark.parametrize("operation", OUTCOMES, ids=OUTCOME_IDS)
async def test_outcome_write_on_an_unknown_job_is_a_lost_lease(
    store: JobStore, operation: Operation
) -> None:
    await submit(store)
    missing = Lease(uuid.uuid4(), 1)

    with pytest.raises(LeaseLost) as raised:
        await OUTCOME_WRITES[operation](store, missing)

    assert (raised.value.job_id, raised.value.lease_token) == (missing.job_id, 1)
