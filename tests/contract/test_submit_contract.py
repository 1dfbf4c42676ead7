"""Submitting and reading jobs: the same answers from every `JobStore`."""

from __future__ import annotations

import uuid

import pytest

from jobqueue.domain.errors import IdempotencyConflict, InvalidJob, JobNotFound
from jobqueue.domain.fields import JsonValue
from jobqueue.domain.job import NewJob
from jobqueue.domain.ports import JobStore
from jobqueue.domain.status import Status
from tests.contract.steps import LEASE, TRACEPARENT, claim_only, new_job
from tests.fakes import TEST_TYPES


async def test_submitted_job_reads_back_pending_and_due_at_its_creation(store: JobStore) -> None:
    submitted = await store.submit(
        new_job({"to": "a@example.com"}, job_type="email", max_attempts=4, key="order-1")
    )

    job = submitted.job
    assert not submitted.replayed
    assert (job.type, job.payload, job.max_attempts) == ("email", {"to": "a@example.com"}, 4)
    assert (job.idempotency_key, job.traceparent) == ("order-1", TRACEPARENT)
    assert (job.status, job.attempts, job.lease_token) == (Status.PENDING, 0, 0)
    assert (job.locked_until, job.last_error) == (None, None)
    assert job.created_at.tzinfo is not None
    assert job.created_at == job.updated_at == job.run_at
    assert await store.get(job.id) == job


async def test_optional_fields_may_be_left_out(store: JobStore) -> None:
    job = (await store.submit(NewJob(type="noop", max_attempts=1))).job

    assert (job.payload, job.idempotency_key, job.traceparent) == ({}, None, None)
    assert await store.get(job.id) == job


@pytest.mark.parametrize(
    "payload",
    [
        {"nested": {"list": [1, 2.5, "three", None, True, False], "empty": {}}},
        [1, "two", {"three": 3}],
        "just a string",
        0.1,
        1.0,
        2**70,
        -(2**63),
        None,
        {"unicode": "zürich ✓ 東京 🚀", "quote": "\"'\\", "newline": "a\nb"},
    ],
    ids=repr,
)
async def test_payload_reads_back_as_the_same_json_value(
    store: JobStore, payload: JsonValue
) -> None:
    submitted = await store.submit(NewJob(type="echo", max_attempts=1, payload=payload))
    fetched = await store.get(submitted.job.id)

    assert submitted.job.payload == payload
    assert fetched.payload == payload
    assert type(fetched.payload) is type(payload)


async def test_store_keeps_its_own_copy_of_the_payload(store: JobStore) -> None:
    payload: dict[str, JsonValue] = {"items": [1, 2]}
    submitted = await store.submit(new_job(payload))

    payload["items"] = []
    assert isinstance(submitted.job.payload, dict)
    submitted.job.payload["added"] = True
    fetched = await store.get(submitted.job.id)
    assert isinstance(fetched.payload, dict)
    fetched.payload["added"] = True

    assert (await store.get(submitted.job.id)).payload == {"items": [1, 2]}


async def test_unknown_job_is_not_found(store: JobStore) -> None:
    missing = uuid.uuid4()

    with pytest.raises(JobNotFound) as raised:
        await store.get(missing)

    assert raised.value.job_id == missing


async def test_same_key_and_same_request_replays_the_first_job(store: JobStore) -> None:
    first = await store.submit(new_job({"a": 1, "b": [1, {"c": 2}]}, key="k"))
    # Payloads compare as jsonb: another key order, or 1.0 for 1, is the same value. The
    # trace context is not part of the request's identity.
    again = await store.submit(new_job({"b": [1, {"c": 2.0}], "a": 1}, key="k", traceparent=None))

    assert not first.replayed
    assert again.replayed
    assert again.job == first.job
    assert [job.id for job in await store.claim(10, LEASE, types=TEST_TYPES)] == [first.job.id]


async def test_replay_returns_the_job_as_it_is_now(store: JobStore) -> None:
    first = (await store.submit(new_job(key="k"))).job
    claimed = await claim_only(store, first)

    again = await store.submit(new_job(key="k"))

    assert again.replayed
    assert again.job == claimed


@pytest.mark.parametrize(
    "different",
    [
        new_job({"n": 1}, job_type="sms", key="k"),
        new_job({"n": 2}, key="k"),
        # JSON tells true from 1, although Python's == does not.
        new_job({"n": True}, key="k"),
        new_job({"n": 1}, max_attempts=4, key="k"),
    ],
    ids=["type", "payload", "boolean-for-number", "max_attempts"],
)
async def test_same_key_with_a_different_request_is_a_conflict(
    store: JobStore, different: NewJob
) -> None:
    first = (await store.submit(new_job({"n": 1}, key="k"))).job

    with pytest.raises(IdempotencyConflict) as raised:
        await store.submit(different)

    assert raised.value.key == "k"
    assert await store.get(first.id) == first
    assert [job.id for job in await store.claim(10, LEASE, types=TEST_TYPES)] == [first.id]


async def test_submissions_without_a_key_are_never_replayed(store: JobStore) -> None:
    first = await store.submit(new_job())
    second = await store.submit(new_job())

    assert not first.replayed
    assert not second.replayed
    assert first.job.id != second.job.id


async def test_different_keys_make_different_jobs(store: JobStore) -> None:
    first = await store.submit(new_job(key="k1"))
    second = await store.submit(new_job(key="k2"))

    assert not second.replayed
    assert first.job.id != second.job.id


@pytest.mark.parametrize(
    "refused",
    [
        NewJob(type="echo", max_attempts=1, payload={"text": "nul \x00 inside"}),
        NewJob(type="echo", max_attempts=1, payload={"nul \x00 key": 1}),
        NewJob(type="echo", max_attempts=1, payload=["lone \ud800 surrogate"]),
        NewJob(type="echo", max_attempts=1, payload={"x": [float("nan")]}),
        NewJob(type="ec\x00ho", max_attempts=1),
        NewJob(type="ec\udc80ho", max_attempts=1),
        NewJob(type="echo", max_attempts=1, idempotency_key="k\x00"),
        NewJob(type="echo", max_attempts=1, traceparent="00-\x00"),
        NewJob(type="echo", max_attempts=0),
        NewJob(type="echo", max_attempts=101),
    ],
    ids=[
        "nul-in-payload-string",
        "nul-in-payload-key",
        "surrogate-in-payload",
        "nan-in-payload",
        "nul-in-type",
        "surrogate-in-type",
        "nul-in-key",
        "nul-in-traceparent",
        "no-attempts",
        "too-many-attempts",
    ],
)
async def test_value_the_store_cannot_hold_is_refused_as_an_invalid_job(
    store: JobStore, refused: NewJob
) -> None:
    # NewJob.build refuses some of these first; the store must hold the line for callers
    # that construct a NewJob directly.
    with pytest.raises(InvalidJob, match="refused"):
        await store.submit(refused)

    assert await store.claim(10, LEASE, types=TEST_TYPES) == []


async def test_ping_answers_when_the_store_is_up(store: JobStore) -> None:
    await store.ping()
