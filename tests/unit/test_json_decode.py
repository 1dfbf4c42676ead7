"""Reading `json`/`jsonb` values from the database (`database.decode_json`)."""

from __future__ import annotations

import json

import pytest

from jobqueue.adapters.postgres.database import decode_json

# As PostgreSQL prints jsonb: every number in plain digits, however large or small.
HUGE_WITH_FRACTION = "1" + "0" * 400 + ".5"


@pytest.mark.parametrize(
    "text",
    [
        '{"a": [1, 2.5, null, true, "x\\u00e9"], "b": {}}',
        "1" + "0" * 400,  # an integer past 64 bits
        "0." + "0" * 400 + "15",  # underflows to 0.0
        '"\\ud83d\\ude00"',  # a surrogate pair
        '{"a": 1, "a": 2}',  # jsonb never keeps duplicates, json keeps the last
    ],
)
def test_values_read_as_the_standard_library_reads_them(text: str) -> None:
    assert decode_json(text) == json.loads(text)


def test_a_number_msgspec_refuses_is_read_as_the_standard_library_reads_it() -> None:
    # msgspec refuses a non-integer beyond a float's range; the database may hold one.
    assert decode_json(HUGE_WITH_FRACTION) == json.loads(HUGE_WITH_FRACTION) == float("inf")
