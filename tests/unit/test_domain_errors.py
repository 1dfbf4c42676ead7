"""Error classification: Permanent stops retries, through any wrapping; nothing else does."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TypeVar
from uuid import uuid4

import pytest

from jobqueue.domain.errors import (
    IdempotencyConflict,
    InvalidJob,
    InvalidPayload,
    InvalidTransition,
    JobNotFound,
    JobQueueError,
    LeaseLost,
    Permanent,
    StoreUnavailable,
    UnknownJobType,
    is_permanent,
    retry_after,
)

E = TypeVar("E", bound=BaseException)


class NotFoundUpstream(Permanent):
    """A handler's own permanent error type."""


def raised(error: E, cause: BaseException) -> E:
    """`error` after `raise error from cause`: the way a handler wraps an error."""
    try:
        raise error from cause
    except BaseException:
        return error


def test_permanent_is_permanent() -> None:
    assert is_permanent(Permanent("card declined"))


def test_subclass_of_permanent_is_permanent() -> None:
    assert is_permanent(NotFoundUpstream("404"))


def test_error_raised_from_permanent_is_permanent() -> None:
    assert is_permanent(raised(RuntimeError("wrapped"), Permanent("bad input")))


def test_deep_cause_chain_ending_in_permanent_is_permanent() -> None:
    error: BaseException = Permanent("root")
    for depth in range(3_000):  # beyond the recursion limit
        error = raised(RuntimeError(f"layer {depth}"), error)
    assert is_permanent(error)


def test_deep_cause_chain_without_permanent_is_retryable() -> None:
    error: BaseException = ValueError("root")
    for depth in range(3_000):  # beyond the recursion limit
        error = raised(RuntimeError(f"layer {depth}"), error)
    assert not is_permanent(error)


def test_exception_group_containing_permanent_is_permanent() -> None:
    group = ExceptionGroup("handler tasks", [ValueError("flaky"), Permanent("bad")])
    assert is_permanent(group)


def test_nested_exception_group_containing_permanent_is_permanent() -> None:
    inner = ExceptionGroup("inner", [TimeoutError(), NotFoundUpstream("gone")])
    outer = ExceptionGroup("outer", [ValueError("flaky"), ExceptionGroup("middle", [inner])])
    assert is_permanent(outer)


def test_group_member_caused_by_permanent_is_permanent() -> None:
    member = raised(OSError("wrapped"), Permanent("bad"))
    assert is_permanent(ExceptionGroup("tasks", [ValueError(), member]))


def test_base_exception_group_containing_permanent_is_permanent() -> None:
    group = BaseExceptionGroup("tasks", [asyncio.CancelledError(), Permanent("bad")])
    assert is_permanent(group)


def test_exception_group_of_retryable_errors_is_retryable() -> None:
    group = ExceptionGroup("tasks", [ValueError(), ExceptionGroup("inner", [TimeoutError()])])
    assert not is_permanent(group)


def test_cycle_in_cause_chain_terminates() -> None:
    first, second = RuntimeError("first"), RuntimeError("second")
    first.__cause__ = second
    second.__cause__ = first
    assert not is_permanent(first)


def test_cycle_through_an_exception_group_still_finds_permanent() -> None:
    member = RuntimeError("member")
    group = ExceptionGroup("tasks", [member, Permanent("bad")])
    member.__cause__ = group  # the group reaches itself through its member
    assert is_permanent(member)


def test_self_caused_error_terminates() -> None:
    error = RuntimeError("loop")
    error.__cause__ = error
    assert not is_permanent(error)


@pytest.mark.parametrize(
    "error",
    [
        TimeoutError(),
        ValueError("bad value"),
        KeyError("k"),
        RuntimeError("boom"),
        OSError("connection reset"),
        ConnectionError(),
        ZeroDivisionError(),
        Exception(),
        asyncio.CancelledError(),
        KeyboardInterrupt(),
        # Store trouble is the store's, not the job's: worth another attempt.
        StoreUnavailable("down"),
        LeaseLost(uuid4(), 3),
    ],
    ids=lambda error: type(error).__name__,
)
def test_other_exceptions_are_retryable(error: BaseException) -> None:
    assert not is_permanent(error)


def test_permanent_in_context_only_is_retryable_because_handling_it_is_not_wrapping() -> None:
    # `raise X` inside `except Permanent:` sets __context__ only: the handler dealt with
    # the permanent failure and then hit a different one, which may well be transient.
    # Only an explicit `raise X from Permanent(...)` (setting __cause__) carries the verdict.
    try:
        try:
            raise Permanent("bad input")
        except Permanent:
            raise ConnectionError("while reporting the bad input") from None
    except ConnectionError as error:
        caught: BaseException = error
    assert isinstance(caught.__context__, Permanent)
    assert caught.__cause__ is None
    assert not is_permanent(caught)


def test_implicit_context_without_suppression_is_retryable_too() -> None:
    try:
        try:
            raise Permanent("bad input")
        except Permanent:
            raise ConnectionError("while reporting")  # noqa: B904 - the implicit context is the point
    except ConnectionError as error:
        caught: BaseException = error
    assert isinstance(caught.__context__, Permanent)
    assert not is_permanent(caught)


@pytest.mark.parametrize(
    "error",
    [InvalidJob("bad"), UnknownJobType("fax", ["email"]), InvalidPayload("email", "no 'to'")],
    ids=lambda error: type(error).__name__,
)
def test_invalid_job_errors_are_permanent(error: InvalidJob) -> None:
    # An unknown type or a payload that fails validation will fail the same way every time.
    assert is_permanent(error)
    assert is_permanent(raised(RuntimeError("wrapped"), error))


def test_all_library_errors_derive_from_one_base() -> None:
    job_id = uuid4()
    errors: list[JobQueueError] = [
        InvalidJob("x"),
        UnknownJobType("fax", []),
        InvalidPayload("email", "x"),
        JobNotFound(job_id),
        IdempotencyConflict("key"),
        InvalidTransition(job_id, "claim", "completed"),
        LeaseLost(job_id, 1),
        StoreUnavailable("down"),
    ]
    assert all(isinstance(error, JobQueueError) for error in errors)
    # Permanent is raised by handlers, not by the library: catching JobQueueError must
    # not swallow a handler's verdict.
    assert not issubclass(Permanent, JobQueueError)


def test_error_messages_say_what_is_wrong() -> None:
    job_id = uuid4()
    assert str(JobNotFound(job_id)) == f"job {job_id} not found"
    assert str(LeaseLost(job_id, 4)) == f"lease 4 on job {job_id} was lost"
    assert str(InvalidPayload("email", "missing field 'to'")) == (
        "invalid payload for job type 'email': missing field 'to'"
    )
    assert "'k-1' was already used" in str(IdempotencyConflict("k-1"))
    assert str(InvalidTransition(job_id, "retry", "completed")) == (
        f"cannot retry job {job_id}: it is completed; "
        "only failed, dead-lettered and cancelled jobs can be retried"
    )


class _Throttled(Exception):
    def __init__(self, seconds: float) -> None:
        super().__init__("throttled")
        self.retry_after = timedelta(seconds=seconds)


def test_retry_after_is_none_for_an_error_that_asks_for_no_wait() -> None:
    assert retry_after(ValueError("nope")) is None


def test_retry_after_is_found_through_an_explicit_cause() -> None:
    outer = RuntimeError("wrapped")
    outer.__cause__ = _Throttled(7)
    assert retry_after(outer) == timedelta(seconds=7)


def test_retry_after_takes_the_longest_wait_in_an_exception_group() -> None:
    group = ExceptionGroup("many", [_Throttled(2), ValueError("x"), _Throttled(9)])
    assert retry_after(group) == timedelta(seconds=9)


def test_retry_after_ignores_an_attribute_that_is_not_a_timedelta() -> None:
    error = ValueError("odd")
    error.retry_after = 30  # type: ignore[attr-defined]
    assert retry_after(error) is None
