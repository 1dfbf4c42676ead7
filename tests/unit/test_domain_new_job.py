"""NewJob.build: what a submission must look like, and messages a client can act on."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobqueue.domain.errors import InvalidJob, UnknownJobType
from jobqueue.domain.fields import (
    MAX_ATTEMPTS,
    MAX_DELAY,
    MAX_IDEMPOTENCY_KEY_LENGTH,
    MAX_TYPE_LENGTH,
)
from jobqueue.domain.job import Job, NewJob, resolve
from jobqueue.domain.registry import Registry
from jobqueue.domain.status import Status
from jobqueue.domain.type_options import NO_OPTIONS

DEFAULT = 5


def build(**overrides: Any) -> NewJob:
    arguments: dict[str, Any] = {"type": "email", "default_max_attempts": DEFAULT}
    arguments.update(overrides)
    return NewJob.build(**arguments)


def test_defaults_give_empty_object_payload_and_configured_max_attempts() -> None:
    job = build()
    assert job == NewJob(type="email", max_attempts=DEFAULT, payload={})
    assert job.idempotency_key is None
    assert job.traceparent is None


def test_default_max_attempts_is_configurable() -> None:
    assert build(default_max_attempts=9).max_attempts == 9


def test_explicit_max_attempts_wins_over_default() -> None:
    assert build(max_attempts=2).max_attempts == 2


def test_default_payloads_are_not_shared_between_jobs() -> None:
    first, second = build(), build()
    assert first.payload == {}
    assert first.payload is not second.payload


@pytest.mark.parametrize("value", [1, MAX_ATTEMPTS])
def test_max_attempts_boundaries_are_accepted(value: int) -> None:
    assert build(max_attempts=value).max_attempts == value


@pytest.mark.parametrize("value", [0, MAX_ATTEMPTS + 1, -1])
def test_max_attempts_out_of_range_is_refused_with_the_range(value: int) -> None:
    with pytest.raises(InvalidJob, match=rf"between 1 and 100, got {value}"):
        build(max_attempts=value)


def test_out_of_range_default_max_attempts_is_refused() -> None:
    with pytest.raises(InvalidJob, match="between 1 and 100"):
        build(default_max_attempts=0)


@pytest.mark.parametrize("value", [True, False, 3.0, "3"], ids=repr)
def test_max_attempts_must_be_a_real_integer(value: object) -> None:
    # bool is an int subclass; `True` must not sneak through as 1.
    with pytest.raises(InvalidJob, match="max_attempts must be an integer"):
        build(max_attempts=value)


@pytest.mark.parametrize("value", [None, 3, ["email"], b"email"])
def test_type_must_be_a_string(value: object) -> None:
    with pytest.raises(InvalidJob, match="type must be a non-empty string"):
        build(type=value)


@pytest.mark.parametrize("value", ["", " ", "\t\n"])
def test_blank_type_is_refused(value: str) -> None:
    with pytest.raises(InvalidJob, match="type must be a non-empty string"):
        build(type=value)


def test_type_length_limit() -> None:
    assert build(type="t" * MAX_TYPE_LENGTH).type == "t" * MAX_TYPE_LENGTH
    with pytest.raises(InvalidJob, match=f"at most {MAX_TYPE_LENGTH} characters"):
        build(type="t" * (MAX_TYPE_LENGTH + 1))


def test_registered_type_is_accepted() -> None:
    assert build(type="email", registered={"email", "sms"}).type == "email"


def test_unregistered_type_is_refused_with_the_known_types_listed() -> None:
    with pytest.raises(UnknownJobType) as raised:
        build(type="fax", registered={"sms", "email"})
    assert str(raised.value) == "unknown job type 'fax' (known types: 'email', 'sms')"
    assert raised.value.job_type == "fax"
    assert isinstance(raised.value, InvalidJob)


def test_unregistered_type_with_nothing_registered_says_so() -> None:
    with pytest.raises(UnknownJobType, match="none registered"):
        build(type="fax", registered=set())


def test_registered_none_skips_the_type_check() -> None:
    # Enqueueing for a worker fleet whose handlers this process does not load.
    assert build(type="anything", registered=None).type == "anything"


def test_build_accepts_a_registry_as_the_registered_types() -> None:
    registry = Registry()

    @registry.handler("email")
    def send(ctx: object, payload: object) -> None:
        return None

    assert build(type="email", registered=registry).type == "email"
    with pytest.raises(UnknownJobType, match="known types: 'email'"):
        build(type="sms", registered=registry)


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"to": "a@example.com", "n": 3, "ratio": 0.5, "ok": True, "none": None},
        [1, "two", [3.0], {"four": [None]}],
        "just a string",
        0,
        -1.5,
        False,
        {"nested": {"deeper": {"deepest": [[], {}]}}},
    ],
    ids=repr,
)
def test_any_json_value_is_accepted_as_payload(payload: Any) -> None:
    assert build(payload=payload).payload == payload


def test_deeply_nested_payload_is_checked_without_recursion_error() -> None:
    payload: list[Any] = []
    innermost = payload
    for _ in range(5_000):  # well past the interpreter recursion limit
        innermost.append([])
        innermost = innermost[0]
    assert build(payload=payload).payload is payload

    innermost.append(math.nan)
    with pytest.raises(InvalidJob, match="which JSON cannot represent"):
        build(payload=payload)


def test_a_list_shared_by_two_branches_is_valid_json() -> None:
    shared = [1, 2]
    assert build(payload={"a": shared, "b": shared}).payload == {"a": shared, "b": shared}


def test_a_payload_that_contains_itself_is_refused() -> None:
    payload: dict[str, Any] = {"items": [1]}
    payload["items"].append(payload)
    with pytest.raises(InvalidJob, match=r"payload\.items\[1\] contains itself"):
        build(payload=payload)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (math.nan, "payload holds nan, which JSON cannot represent"),
        ({"x": math.inf}, "payload.x holds inf, which JSON cannot represent"),
        ([1, -math.inf], r"payload\[1\] holds -inf, which JSON cannot represent"),
        ({"tags": {"a"}}, "payload.tags holds a set, which is not a JSON value"),
        (b"raw", "payload holds a bytes, which is not a JSON value"),
        ({"a": [0, {"b": b"x"}]}, r"payload.a\[1\].b holds a bytes"),
        ({1: "one"}, "payload has a non-string key 1"),
        ({"outer": {None: 1}}, "payload.outer has a non-string key None"),
        ((1, 2), "payload holds a tuple, which is not a JSON value"),
        (object(), "payload holds a object, which is not a JSON value"),
    ],
    ids=lambda value: value if isinstance(value, str) else type(value).__name__,
)
def test_non_json_payload_is_refused_with_the_offending_path(payload: Any, message: str) -> None:
    with pytest.raises(InvalidJob, match=message):
        build(payload=payload)


def test_first_offending_value_in_document_order_is_reported() -> None:
    with pytest.raises(InvalidJob, match=r"payload\[1\] holds nan"):
        build(payload=[0, math.nan, {1: 2}, b"x"])


@pytest.mark.parametrize("key", ["k", "order-42", "k" * MAX_IDEMPOTENCY_KEY_LENGTH])
def test_idempotency_key_within_limits_is_kept(key: str) -> None:
    assert build(idempotency_key=key).idempotency_key == key


@pytest.mark.parametrize(
    "key", ["", "   ", "k" * (MAX_IDEMPOTENCY_KEY_LENGTH + 1), 42, b"key"], ids=repr
)
def test_idempotency_key_outside_limits_is_refused(key: object) -> None:
    with pytest.raises(InvalidJob, match="Idempotency-Key must be 1 to 255 non-blank characters"):
        build(idempotency_key=key)


def test_traceparent_is_carried() -> None:
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    assert build(traceparent=traceparent).traceparent == traceparent


def test_a_stored_submission_is_pending_due_at_once_and_never_leased() -> None:
    new = build(payload={"n": 1}, max_attempts=7, idempotency_key="k", traceparent="tp")
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    job_id = UUID(int=9)
    assert new.stored(job_id, now) == Job(
        id=job_id,
        type="email",
        payload={"n": 1},
        status=Status.PENDING,
        attempts=0,
        max_attempts=7,
        run_at=now,
        locked_until=None,
        lease_token=0,
        last_error=None,
        idempotency_key="k",
        created_at=now,
        updated_at=now,
        traceparent="tp",
    )


# --- scheduling --------------------------------------------------------------------------

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def test_a_submission_without_a_schedule_is_due_when_stored() -> None:
    new = build()
    assert (new.run_at, new.delay) == (None, None)
    assert new.stored(UUID(int=1), NOW).run_at == NOW


def test_a_delay_counts_from_the_store_clock() -> None:
    new = build(delay=timedelta(seconds=90))
    assert new.stored(UUID(int=1), NOW).run_at == NOW + timedelta(seconds=90)
    assert new.stored(UUID(int=1), NOW).created_at == NOW


def test_run_at_is_kept_as_given_even_when_already_past() -> None:
    later = datetime(2027, 1, 1, 8, 0, tzinfo=timezone(timedelta(hours=-5)))
    assert build(run_at=later).stored(UUID(int=1), NOW).run_at == later
    earlier = NOW - timedelta(days=1)
    assert build(run_at=earlier).stored(UUID(int=1), NOW).run_at == earlier


@pytest.mark.parametrize("delay", [timedelta(0), MAX_DELAY])
def test_delay_boundaries_are_accepted(delay: timedelta) -> None:
    assert build(delay=delay).delay == delay


@pytest.mark.parametrize("delay", [timedelta(microseconds=-1), MAX_DELAY + timedelta(seconds=1)])
def test_delay_out_of_range_is_refused_with_the_range(delay: timedelta) -> None:
    with pytest.raises(InvalidJob, match="delay must be between 0 and 3650 days"):
        build(delay=delay)


def test_run_at_and_delay_together_are_refused() -> None:
    with pytest.raises(InvalidJob, match="give run_at or delay, not both"):
        build(run_at=NOW, delay=timedelta(seconds=1))


def test_run_at_without_an_offset_is_refused() -> None:
    with pytest.raises(InvalidJob, match="run_at must carry a time zone offset"):
        build(run_at=datetime(2026, 12, 1, 9, 0))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("run_at", "2026-12-01T09:00:00Z", "run_at must be a datetime, got a str"),
        ("delay", 30, "delay must be a timedelta, got a int"),
    ],
)
def test_schedule_values_of_the_wrong_type_are_refused(
    field: str, value: object, message: str
) -> None:
    with pytest.raises(InvalidJob, match=message):
        build(**{field: value})


@given(
    max_attempts=st.none() | st.integers(1, 100),
    queue=st.none() | st.sampled_from(["default", "reports"]),
    priority=st.none() | st.integers(0, 9),
    timeout=st.none() | st.sampled_from([timedelta(seconds=1), timedelta(minutes=5)]),
    budget=st.integers(1, 100),
)
def test_building_with_a_default_budget_is_resolving_with_no_options(
    max_attempts: int | None,
    queue: str | None,
    priority: int | None,
    timeout: timedelta | None,
    budget: int,
) -> None:
    # `build` resolves at once, without the type's options, by a shortcut of its own: it
    # must give what the one rule gives.
    options: dict[str, Any] = {
        "max_attempts": max_attempts,
        "queue": queue,
        "priority": priority,
        "timeout": timeout,
    }
    at_once = NewJob.build(type="email", **options, default_max_attempts=budget)
    later = resolve(NewJob.build(type="email", **options), NO_OPTIONS, budget)
    assert at_once == later
    assert at_once.left_out == frozenset()
