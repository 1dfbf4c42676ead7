"""Unique jobs: one job per key among the jobs in the statuses it counts in (and per
period slot), a duplicate answered with the job holding the key, never an error."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobqueue.domain.errors import InvalidJob, UniqueKeyHeld
from jobqueue.domain.fields import JsonValue
from jobqueue.domain.job import NewJob
from jobqueue.domain.outcome import Decision
from jobqueue.domain.ports import JobStore
from jobqueue.domain.status import Status
from jobqueue.domain.unique import Unique
from tests.contract.steps import LEASE, claim_only
from tests.support.endings import record


def unique_job(payload: dict[str, JsonValue], unique: Unique, job_type: str = "sync") -> NewJob:
    return NewJob.build(type=job_type, payload=payload, max_attempts=3, unique=unique)


async def test_a_duplicate_is_answered_with_the_job_holding_the_key(store: JobStore) -> None:
    by_account = Unique(by=("account",))
    first = await store.submit(unique_job({"account": 7, "page": 1}, by_account))

    again = await store.submit(unique_job({"account": 7, "page": 2}, by_account))
    other = await store.submit(unique_job({"account": 8, "page": 1}, by_account))

    assert (first.duplicate, again.duplicate, other.duplicate) == (False, True, False)
    assert again.job.id == first.job.id
    assert again.job == await store.get(first.job.id)
    assert other.job.id != first.job.id
    assert first.job.unique_key == again.job.unique_key
    assert first.job.unique_states == ("pending", "processing")


async def test_a_key_counts_only_in_its_statuses(store: JobStore) -> None:
    unique = Unique(key="nightly-report")
    first = (await store.submit(unique_job({}, unique))).job
    claimed = await claim_only(store, first, LEASE)
    # Running: still counted.
    assert (await store.submit(unique_job({}, unique))).duplicate
    await record(store, claimed.lease, Decision.complete())

    after = await store.submit(unique_job({}, unique))

    assert not after.duplicate
    assert after.job.id != first.id


async def test_counted_in_every_status_a_key_is_used_once_for_good(store: JobStore) -> None:
    unique = Unique(key="once", states=frozenset(Status))
    first = (await store.submit(unique_job({}, unique))).job
    claimed = await claim_only(store, first, LEASE)
    await record(store, claimed.lease, Decision.complete())

    again = await store.submit(unique_job({}, unique))

    assert again.duplicate
    assert (again.job.id, again.job.status) == (first.id, Status.COMPLETED)


async def test_a_period_makes_one_job_per_key_per_slot(store: JobStore) -> None:
    hourly = Unique(key="digest", period=timedelta(hours=1))
    first = (await store.submit(unique_job({}, hourly))).job
    again = await store.submit(unique_job({}, hourly))

    assert again.duplicate
    # The slot by the store's clock at the insert, which stamped created_at.
    slot = (first.created_at - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(hours=1)
    assert first.unique_key == f"digest@{slot}"
    assert await store.get(first.id) == first


async def test_retrying_a_job_whose_key_another_job_holds_is_refused(store: JobStore) -> None:
    unique = Unique(key="k")
    first = (await store.submit(unique_job({}, unique))).job
    claimed = await claim_only(store, first, LEASE)
    await record(store, claimed.lease, Decision.fail("bad"))
    second = (await store.submit(unique_job({}, unique))).job

    with pytest.raises(UniqueKeyHeld):
        await store.retry(first.id)

    assert (await store.get(first.id)).status is Status.FAILED
    await store.cancel(second.id)
    assert (await store.retry(first.id)).status is Status.PENDING


async def test_jobs_that_are_not_unique_never_conflict(store: JobStore) -> None:
    new = NewJob.build(type="sync", payload={"account": 7}, max_attempts=3)
    ids = {(await store.submit(new)).job.id for _ in range(3)}
    assert len(ids) == 3


@pytest.mark.parametrize(
    ("unique", "message"),
    [
        (lambda: Unique(states=frozenset({Status.PENDING})), "must include processing"),
        (lambda: Unique(key="a", by=("x",)), "not both"),
        (lambda: Unique(key=""), "unique key must be 1 to 255"),
        (lambda: Unique(period=timedelta(milliseconds=1500)), "whole number of seconds"),
        (lambda: Unique(period=timedelta(0)), "unique period must be between"),
    ],
)
def test_a_uniqueness_no_job_can_have_is_refused(unique: object, message: str) -> None:
    with pytest.raises(InvalidJob, match=message):
        unique()  # type: ignore[operator]


def test_the_derived_key_compares_payload_fields_as_json_values() -> None:
    unique = Unique(by=("a", "b"))
    assert unique.key_for("t", {"b": [1, 2], "a": {"y": 1, "x": 2}, "c": 0}) == unique.key_for(
        "t", {"a": {"x": 2, "y": 1}, "b": [1, 2]}
    )
    assert unique.key_for("t", {"a": 1, "b": 2}) != unique.key_for("u", {"a": 1, "b": 2})
    with pytest.raises(InvalidJob, match="has no field b"):
        unique.key_for("t", {"a": 1})
