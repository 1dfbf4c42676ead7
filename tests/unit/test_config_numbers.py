"""Settings that are numbers: the whole numbers' ranges and MAX_BODY_BYTES's sizes."""

from __future__ import annotations

import pytest

from jobqueue.entrypoints.config.settings import Settings
from tests.support.settings_problems import problems_of


@pytest.mark.parametrize(
    ("name", "attribute", "low", "high"),
    [("WORKERS", "workers", 1, 10_000), ("MAX_ATTEMPTS", "max_attempts", 1, 100)],
)
def test_integer_variables_accept_their_whole_range(
    name: str, attribute: str, low: int, high: int
) -> None:
    assert getattr(Settings.from_env({name: str(low)}), attribute) == low
    assert getattr(Settings.from_env({name: str(high)}), attribute) == high


@pytest.mark.parametrize(
    ("name", "raw", "why"),
    [
        ("WORKERS", "four", "'four' is not a whole number"),
        ("WORKERS", "2.5", "'2.5' is not a whole number"),
        ("WORKERS", "0", "0 is not between 1 and 10000"),
        ("WORKERS", "-3", "-3 is not between 1 and 10000"),
        ("WORKERS", "10001", "10001 is not between 1 and 10000"),
        ("MAX_ATTEMPTS", "0", "0 is not between 1 and 100"),
        ("MAX_ATTEMPTS", "101", "101 is not between 1 and 100"),
        ("MAX_ATTEMPTS", "many", "'many' is not a whole number"),
    ],
)
def test_integer_variable_refusals(name: str, raw: str, why: str) -> None:
    assert problems_of({name: raw}) == [f"{name}: {why}"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2048", 2048),
        ("64", 64),
        ("512KiB", 512 * 1024),
        ("1MiB", 1024 * 1024),
        ("1 mib", 1024 * 1024),
        ("1MB", 1_000_000),
        ("10kb", 10_000),
        ("1GiB", 1 << 30),
        ("100B", 100),
    ],
)
def test_max_body_bytes_accepts_bytes_and_units(raw: str, expected: int) -> None:
    assert Settings.from_env({"MAX_BODY_BYTES": raw}).max_body_bytes == expected


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("lots", "'lots' is not a size"),
        ("1.5MiB", "'1.5MiB' is not a size"),
        ("-5", "'-5' is not a size"),
        ("10", "10 is not between 64 and 1073741824 bytes"),
        ("2GiB", "2147483648 is not between 64 and 1073741824 bytes"),
    ],
)
def test_max_body_bytes_refusals(raw: str, why: str) -> None:
    [problem] = problems_of({"MAX_BODY_BYTES": raw})

    assert problem.startswith(f"MAX_BODY_BYTES: {why}")
