"""Backoff: delay for attempt n is uniform in [c/2, c], c = min(base * 2**(n-1), cap)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobqueue.domain.backoff import Backoff

US = timedelta(microseconds=1)
MAX_US = timedelta.max // US
# Largest float below 1.0: what random.random() can return at most.
ALMOST_ONE = 1.0 - 2.0**-53

# No deadline: on a loaded machine the property matters, not one example's wall time.
# The functions are cheap, so a moderate example count keeps the suite quick.
properties = settings(deadline=None, max_examples=60)

attempts = st.one_of(
    st.integers(min_value=1, max_value=70),
    st.integers(min_value=1, max_value=10_000),
    st.integers(min_value=10_000, max_value=10**12),
)
draws = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)


@st.composite
def backoffs(draw: st.DrawFn) -> Backoff:
    base_us = draw(st.integers(min_value=1, max_value=MAX_US))
    cap_us = draw(st.integers(min_value=base_us, max_value=MAX_US))
    return Backoff(base=base_us * US, cap=cap_us * US)


def expected_ceiling_us(backoff: Backoff, attempt: int) -> int:
    """The definition, computed in whole microseconds without any shortcut."""
    cap_us = backoff.cap // US
    base_us = backoff.base // US
    # Once base * 2**k passes the cap it stays there; stop doubling then.
    value = base_us
    for _ in range(attempt - 1):
        value *= 2
        if value >= cap_us:
            return cap_us
    return min(value, cap_us)


@properties
@given(backoff=backoffs(), attempt=attempts, rand=draws)
def test_delay_lies_between_half_the_ceiling_and_the_ceiling(
    backoff: Backoff, attempt: int, rand: float
) -> None:
    ceiling_us = expected_ceiling_us(backoff, attempt)
    delay_us = backoff.delay(attempt, lambda: rand) // US
    assert ceiling_us <= 2 * delay_us
    assert delay_us <= ceiling_us


@properties
@given(backoff=backoffs(), attempt=attempts)
def test_ceiling_is_base_doubled_per_attempt_until_the_cap(backoff: Backoff, attempt: int) -> None:
    assert backoff.ceiling(attempt) // US == expected_ceiling_us(backoff, attempt)


@properties
@given(backoff=backoffs(), attempt=st.integers(min_value=1, max_value=200))
def test_ceiling_doubles_from_one_attempt_to_the_next_until_it_reaches_the_cap(
    backoff: Backoff, attempt: int
) -> None:
    current_us = backoff.ceiling(attempt) // US
    following_us = backoff.ceiling(attempt + 1) // US
    assert following_us == min(2 * current_us, backoff.cap // US)


@properties
@given(backoff=backoffs(), attempt=attempts)
def test_zero_draw_gives_half_the_ceiling_and_a_draw_near_one_the_ceiling(
    backoff: Backoff, attempt: int
) -> None:
    ceiling_us = backoff.ceiling(attempt) // US
    # Half of an odd number of microseconds rounds up: never below c/2.
    assert backoff.delay(attempt, lambda: 0.0) // US == (ceiling_us + 1) // 2
    top_us = backoff.delay(attempt, lambda: ALMOST_ONE) // US
    # Exact while the spread fits a float's 53 bits; within float resolution beyond.
    assert ceiling_us - top_us <= max(1, ceiling_us >> 52)


@properties
@given(backoff=backoffs(), attempt=attempts, low=draws, high=draws)
def test_delay_grows_with_the_draw(backoff: Backoff, attempt: int, low: float, high: float) -> None:
    low, high = sorted((low, high))
    assert backoff.delay(attempt, lambda: low) <= backoff.delay(attempt, lambda: high)


def test_delays_of_the_first_attempts_with_an_exact_random_source() -> None:
    backoff = Backoff(base=timedelta(seconds=1), cap=timedelta(minutes=1))
    half_way = 0.5
    assert [backoff.delay(n, lambda: half_way) for n in range(1, 9)] == [
        timedelta(seconds=0.75),
        timedelta(seconds=1.5),
        timedelta(seconds=3),
        timedelta(seconds=6),
        timedelta(seconds=12),
        timedelta(seconds=24),
        timedelta(seconds=45),  # c = min(64s, 60s) = 60s
        timedelta(seconds=45),
    ]


@pytest.mark.parametrize("attempt", [10_000, 10**6, 10**18])
def test_huge_attempt_numbers_return_the_cap(attempt: int) -> None:
    backoff = Backoff(base=timedelta(seconds=1), cap=timedelta(hours=1))
    assert backoff.ceiling(attempt) == timedelta(hours=1)
    assert backoff.delay(attempt, lambda: 0.0) == timedelta(minutes=30)
    assert backoff.delay(attempt, lambda: ALMOST_ONE) == timedelta(hours=1)


def test_largest_cap_a_timedelta_holds_does_not_overflow() -> None:
    backoff = Backoff(base=US, cap=timedelta.max)
    assert backoff.ceiling(10_000) == timedelta.max
    assert backoff.delay(10_000, lambda: ALMOST_ONE) <= timedelta.max
    assert backoff.delay(10_000, lambda: 1.0) == timedelta.max


def test_default_random_source_stays_within_bounds() -> None:
    backoff = Backoff(base=timedelta(seconds=2), cap=timedelta(seconds=10))
    for _ in range(200):
        assert timedelta(seconds=1) <= backoff.delay(1) <= timedelta(seconds=2)


@pytest.mark.parametrize("attempt", [0, -1, -(10**9)])
def test_attempt_below_one_is_refused(attempt: int) -> None:
    backoff = Backoff(base=timedelta(seconds=1), cap=timedelta(seconds=10))
    with pytest.raises(ValueError, match="attempt numbers start at 1"):
        backoff.ceiling(attempt)
    with pytest.raises(ValueError, match="attempt numbers start at 1"):
        backoff.delay(attempt, lambda: 0.5)


@pytest.mark.parametrize("draw", [-0.1, 1.5, float("nan"), float("inf")])
def test_random_source_outside_unit_interval_is_refused(draw: float) -> None:
    backoff = Backoff(base=timedelta(seconds=1), cap=timedelta(seconds=10))
    with pytest.raises(ValueError, match="rand must return a number in"):
        backoff.delay(1, lambda: draw)


@pytest.mark.parametrize(
    ("base", "cap", "message"),
    [
        (timedelta(0), timedelta(seconds=1), "base must be positive"),
        (timedelta(seconds=-1), timedelta(seconds=1), "base must be positive"),
        (timedelta(seconds=2), timedelta(seconds=1), "cap must be at least the base"),
    ],
)
def test_invalid_construction_is_refused(base: timedelta, cap: timedelta, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Backoff(base=base, cap=cap)


def test_cap_equal_to_base_is_a_constant_ceiling() -> None:
    backoff = Backoff(base=timedelta(seconds=5), cap=timedelta(seconds=5))
    assert {backoff.ceiling(n) for n in (1, 2, 50)} == {timedelta(seconds=5)}
