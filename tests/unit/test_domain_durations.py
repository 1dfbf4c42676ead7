"""Go-style durations: what configuration and payloads may say, and how they are shown."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobqueue.domain.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("500ms", timedelta(milliseconds=500)),
        ("1m30s", timedelta(seconds=90)),
        ("1.5h", timedelta(minutes=90)),
        ("2h45m", timedelta(hours=2, minutes=45)),
        ("0", timedelta(0)),
        ("0s", timedelta(0)),
        ("300us", timedelta(microseconds=300)),
        ("300µs", timedelta(microseconds=300)),  # MICRO SIGN
        ("300μs", timedelta(microseconds=300)),  # GREEK SMALL LETTER MU
        ("1500ns", timedelta(microseconds=2)),  # to the nearest microsecond
        ("30s", timedelta(seconds=30)),
        (".5s", timedelta(milliseconds=500)),
        ("1.s", timedelta(seconds=1)),
        ("1.1s", timedelta(seconds=1, microseconds=100_000)),
        ("1h1m1s1ms1us", timedelta(hours=1, minutes=1, seconds=1, milliseconds=1, microseconds=1)),
        ("1s1s", timedelta(seconds=2)),
        (" 30s\n", timedelta(seconds=30)),
        ("100000h", timedelta(hours=100_000)),
    ],
)
def test_go_duration_forms_are_parsed(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


def test_fractions_are_exact_even_beyond_float_precision() -> None:
    # 10,000,000 hours is ~3.6e16 microseconds: more than a float holds exactly.
    assert parse_duration("10000000h0.000001s") == timedelta(hours=10_000_000, microseconds=1)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty duration"),
        ("   ", "empty duration"),
        ("5", "invalid duration '5'"),
        ("1d", "invalid duration '1d'"),
        ("-1s", "durations cannot be negative"),
        ("s", "invalid duration 's'"),
        ("1m 30s", "invalid duration '1m 30s'"),
        (".s", "invalid duration"),
        ("1.2.3s", "invalid duration"),
        ("1e3s", "invalid duration"),
        ("+1s", "invalid duration"),
        ("30S", "invalid duration"),
        ("30 s", "invalid duration"),
        ("1h30", "invalid duration"),
        ("nan s", "invalid duration"),
        ("1000000000000h", "too long"),
    ],
)
def test_malformed_durations_are_refused_with_a_hint(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_duration(text)


def test_non_string_is_refused() -> None:
    with pytest.raises(ValueError, match="expected a duration string"):
        parse_duration(30)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (timedelta(0), "0s"),
        (timedelta(microseconds=300), "300us"),
        (timedelta(milliseconds=250), "250ms"),
        (timedelta(microseconds=1_500), "1.5ms"),
        (timedelta(seconds=30), "30s"),
        (timedelta(seconds=90), "1m30s"),
        (timedelta(minutes=90), "1h30m"),
        (timedelta(hours=2, minutes=45), "2h45m"),
        (timedelta(hours=1, milliseconds=500), "1h0.5s"),
        (timedelta(seconds=59, microseconds=999_999), "59.999999s"),
        (timedelta(days=2), "48h"),
        (-timedelta(seconds=1.5), "-1.5s"),
    ],
)
def test_format_duration_writes_the_go_form(value: timedelta, text: str) -> None:
    assert format_duration(value) == text


@settings(deadline=None)
@given(st.timedeltas(min_value=timedelta(0)))
def test_format_then_parse_gives_back_the_same_duration(value: timedelta) -> None:
    assert parse_duration(format_duration(value)) == value
