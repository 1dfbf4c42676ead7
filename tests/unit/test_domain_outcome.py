"""decide(): how an attempt ended -> what the store must do next."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobqueue.domain.attempts import Outcome
from jobqueue.domain.backoff import Backoff
from jobqueue.domain.fields import MAX_ATTEMPTS
from jobqueue.domain.job import Job
from jobqueue.domain.outcome import (
    MAX_ERROR_LENGTH,
    Decision,
    Ending,
    Errored,
    Interrupted,
    Snooze,
    Snoozed,
    Succeeded,
    TimedOut,
    decide,
)
from jobqueue.domain.status import Status
from jobqueue.domain.transitions import Operation, targets

BACKOFF = Backoff(base=timedelta(seconds=1), cap=timedelta(minutes=10))
US = timedelta(microseconds=1)
NOW = datetime(2025, 1, 1, tzinfo=UTC)


def claimed(attempts: int, max_attempts: int, snoozes: int = 0) -> Job:
    """A job as the claim returned it: `attempts` already counts the running attempt."""
    return Job(
        id=uuid4(),
        type="email",
        payload={},
        status=Status.PROCESSING,
        attempts=attempts,
        max_attempts=max_attempts,
        run_at=NOW,
        locked_until=NOW + timedelta(minutes=5),
        lease_token=attempts,
        last_error=None,
        idempotency_key=None,
        created_at=NOW,
        updated_at=NOW,
        snoozes=snoozes,
    )


def never_called() -> float:
    raise AssertionError("this decision must not draw a backoff delay")


# (attempts, max_attempts) with attempts left, and on or past the last attempt.
WITH_ATTEMPTS_LEFT = [(1, 2), (1, 3), (2, 3), (1, MAX_ATTEMPTS), (MAX_ATTEMPTS - 1, MAX_ATTEMPTS)]
ON_LAST_ATTEMPT = [(1, 1), (3, 3), (MAX_ATTEMPTS, MAX_ATTEMPTS), (4, 3), (250, 100)]


@pytest.mark.parametrize(("attempts", "max_attempts"), WITH_ATTEMPTS_LEFT + ON_LAST_ATTEMPT)
def test_success_completes(attempts: int, max_attempts: int) -> None:
    decision = decide(claimed(attempts, max_attempts), Succeeded(), BACKOFF, never_called)
    assert decision == Decision.complete()


@pytest.mark.parametrize(("attempts", "max_attempts"), WITH_ATTEMPTS_LEFT + ON_LAST_ATTEMPT)
def test_interrupted_attempt_is_released_even_on_the_last_attempt(
    attempts: int, max_attempts: int
) -> None:
    # Shutdown is not the job's fault: the attempt is given back, never dead-lettered.
    decision = decide(claimed(attempts, max_attempts), Interrupted(), BACKOFF, never_called)
    assert decision == Decision.release()


@pytest.mark.parametrize(("attempts", "max_attempts"), WITH_ATTEMPTS_LEFT + ON_LAST_ATTEMPT)
def test_permanent_error_fails_even_with_attempts_left(attempts: int, max_attempts: int) -> None:
    ending = Errored(error="card declined", permanent=True)
    decision = decide(claimed(attempts, max_attempts), ending, BACKOFF, never_called)
    assert decision == Decision.fail("card declined")


def test_permanent_error_on_the_first_of_many_attempts_fails() -> None:
    ending = Errored(error="bad address", permanent=True)
    assert decide(claimed(1, MAX_ATTEMPTS), ending, BACKOFF, never_called) == Decision.fail(
        "bad address"
    )


@pytest.mark.parametrize(("attempts", "max_attempts"), WITH_ATTEMPTS_LEFT)
def test_retryable_error_with_attempts_left_retries_after_backoff(
    attempts: int, max_attempts: int
) -> None:
    ending = Errored(error="connection reset", permanent=False)
    decision = decide(claimed(attempts, max_attempts), ending, BACKOFF, lambda: 0.5)
    assert decision == Decision.backoff(BACKOFF.delay(attempts, lambda: 0.5), "connection reset")


@pytest.mark.parametrize(("attempts", "max_attempts"), WITH_ATTEMPTS_LEFT)
def test_timeout_with_attempts_left_retries_after_backoff(attempts: int, max_attempts: int) -> None:
    ending = TimedOut(timeout=timedelta(seconds=30))
    decision = decide(claimed(attempts, max_attempts), ending, BACKOFF, lambda: 0.5)
    assert decision == Decision.backoff(
        BACKOFF.delay(attempts, lambda: 0.5), "attempt timed out after 30s"
    )


@pytest.mark.parametrize(("attempts", "max_attempts"), ON_LAST_ATTEMPT)
def test_retryable_error_on_or_after_the_last_attempt_dead_letters(
    attempts: int, max_attempts: int
) -> None:
    ending = Errored(error="connection reset", permanent=False)
    decision = decide(claimed(attempts, max_attempts), ending, BACKOFF, never_called)
    assert decision == Decision.dead_letter("connection reset")


@pytest.mark.parametrize(("attempts", "max_attempts"), ON_LAST_ATTEMPT)
def test_timeout_on_or_after_the_last_attempt_dead_letters(
    attempts: int, max_attempts: int
) -> None:
    ending = TimedOut(timeout=timedelta(milliseconds=1500))
    decision = decide(claimed(attempts, max_attempts), ending, BACKOFF, never_called)
    assert decision == Decision.dead_letter("attempt timed out after 1.5s")


@st.composite
def attempts_left(draw: st.DrawFn) -> tuple[int, int]:
    """(attempts, max_attempts) with at least one attempt still to come."""
    max_attempts = draw(st.integers(min_value=2, max_value=MAX_ATTEMPTS))
    return draw(st.integers(min_value=1, max_value=max_attempts - 1)), max_attempts


@settings(deadline=None, max_examples=60)
@given(
    counts=attempts_left(),
    rand=st.floats(min_value=0.0, max_value=1.0, exclude_max=True),
    timed_out=st.booleans(),
)
def test_retry_delay_lies_within_the_backoff_bounds_for_the_attempt(
    counts: tuple[int, int], rand: float, timed_out: bool
) -> None:
    attempts, max_attempts = counts
    ending: Ending = (
        TimedOut(timeout=timedelta(seconds=5))
        if timed_out
        else Errored(error="flaky", permanent=False)
    )
    decision = decide(claimed(attempts, max_attempts), ending, BACKOFF, lambda: rand)
    assert decision.outcome is Outcome.RETRIED
    assert decision.delay is not None
    ceiling_us = BACKOFF.ceiling(attempts) // US
    delay_us = decision.delay // US
    assert ceiling_us <= 2 * delay_us <= 2 * ceiling_us


def test_retry_delays_grow_with_the_attempt_number() -> None:
    ending = Errored(error="flaky", permanent=False)
    delays = []
    for attempts in range(1, 6):
        decision = decide(claimed(attempts, 10), ending, BACKOFF, lambda: 0.0)
        assert decision.outcome is Outcome.RETRIED
        assert decision.delay is not None
        delays.append(decision.delay)
    assert delays == [timedelta(seconds=s) for s in (0.5, 1, 2, 4, 8)]


def test_default_random_source_is_used_when_none_is_given() -> None:
    decision = decide(claimed(1, 3), Errored(error="flaky", permanent=False), BACKOFF)
    assert decision.outcome is Outcome.RETRIED
    assert decision.delay is not None
    assert timedelta(seconds=0.5) <= decision.delay <= timedelta(seconds=1)


@pytest.mark.parametrize("permanent", [True, False])
@pytest.mark.parametrize("attempts", [1, 3])
def test_long_error_messages_are_clipped(permanent: bool, attempts: int) -> None:
    message = "x" * (MAX_ERROR_LENGTH * 3)
    ending = Errored(error=message, permanent=permanent)
    decision = decide(claimed(attempts, 3), ending, BACKOFF, lambda: 0.5)
    assert decision.error is not None
    assert len(decision.error) == MAX_ERROR_LENGTH
    assert decision.error == "x" * (MAX_ERROR_LENGTH - 1) + "…"


def test_error_message_at_the_limit_is_kept_whole() -> None:
    message = "y" * MAX_ERROR_LENGTH
    decision = decide(claimed(1, 1), Errored(error=message, permanent=False), BACKOFF)
    assert decision == Decision.dead_letter(message)


@pytest.mark.parametrize(
    ("decision", "operation"),
    [
        (Decision.complete(), Operation.COMPLETE),
        (Decision.backoff(timedelta(seconds=1), "e"), Operation.BACKOFF),
        (Decision.fail("e"), Operation.FAIL),
        (Decision.dead_letter("e"), Operation.DEAD_LETTER),
        (Decision.release(), Operation.RELEASE),
        (Decision.snooze(timedelta(seconds=1)), Operation.SNOOZE),
    ],
    ids=lambda value: str(value.outcome) if isinstance(value, Decision) else str(value),
)
def test_every_decision_names_an_operation_allowed_from_processing(
    decision: Decision, operation: Operation
) -> None:
    # The worker executes a decision as one store transition on the job it claimed.
    assert decision.operation is operation
    assert targets(decision.operation, Status.PROCESSING)


def test_retry_after_floor_lengthens_a_shorter_backoff_delay() -> None:
    floor = timedelta(minutes=3)
    decision = decide(claimed(1, 5), Errored("429", permanent=False, retry_after=floor), BACKOFF)
    assert decision == Decision.backoff(floor, "429")


def test_retry_after_floor_never_shortens_a_longer_backoff_delay() -> None:
    job = claimed(4, 5)  # ceiling 8s, half-jitter gives at least 4s
    ending = Errored("429", permanent=False, retry_after=timedelta(seconds=1))
    decision = decide(job, ending, BACKOFF, lambda: 0.0)
    assert decision == Decision.backoff(BACKOFF.ceiling(4) / 2, "429")


def test_retry_after_floor_does_not_save_the_last_attempt() -> None:
    ending = Errored("429", permanent=False, retry_after=timedelta(seconds=1))
    assert decide(claimed(3, 3), ending, BACKOFF, never_called) == Decision.dead_letter("429")


@pytest.mark.parametrize(
    ("decision", "name"),
    [
        (Decision.complete(), "completed"),
        (Decision.backoff(timedelta(seconds=1), "x"), "retried"),
        (Decision.fail("x"), "failed"),
        (Decision.dead_letter("x"), "dead_letter"),
        (Decision.release(), "released"),
    ],
)
def test_every_decision_has_the_outcome_name_logs_and_metrics_use(
    decision: Decision, name: str
) -> None:
    assert decision.outcome == name


# --- snoozes ----------------------------------------------------------------------------


@pytest.mark.parametrize("snoozes", [0, 1, 99])
def test_a_snooze_under_the_bound_gives_the_attempt_back(snoozes: int) -> None:
    delay = timedelta(minutes=2)
    decision = decide(claimed(1, 1, snoozes), Snoozed(delay), BACKOFF, never_called, 100)
    assert decision == Decision.snooze(delay)
    assert (decision.status, decision.gives_back_attempt, decision.snoozed) == (
        Status.PENDING,
        True,
        True,
    )
    assert decision.outcome is Outcome.SNOOZED


def test_a_snooze_past_the_bound_costs_the_attempt_and_waits_at_least_its_delay() -> None:
    delay = timedelta(hours=1)
    decision = decide(claimed(1, 3, snoozes=5), Snoozed(delay), BACKOFF, lambda: 0.5, 5)
    assert decision == Decision.backoff(delay, "snoozed 5 times, the most allowed (MAX_SNOOZES)")
    assert not decision.gives_back_attempt


def test_a_snooze_past_the_bound_on_the_last_attempt_dead_letters() -> None:
    decision = decide(claimed(3, 3, snoozes=1), Snoozed(timedelta(0)), BACKOFF, never_called, 1)
    assert decision.status is Status.DEAD_LETTER


@pytest.mark.parametrize(
    ("given", "delay"),
    [(90, timedelta(seconds=90)), (0.5, timedelta(milliseconds=500)), (timedelta(0), timedelta(0))],
)
def test_snooze_takes_a_timedelta_or_seconds(given: timedelta | float, delay: timedelta) -> None:
    assert Snooze(given).delay == delay


@pytest.mark.parametrize(
    ("given", "error"),
    [(-1, ValueError), (timedelta(days=3651), ValueError), ("5s", TypeError), (True, TypeError)],
)
def test_snooze_refuses_a_delay_it_cannot_keep(given: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        Snooze(given)  # type: ignore[arg-type]
