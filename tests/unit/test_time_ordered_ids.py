"""Client-made job ids (`adapters.postgres.ids`): UUID version 7, ascending, unique."""

from __future__ import annotations

import os
import time
import uuid

import pytest

from jobqueue.adapters.postgres.ids import time_ordered_ids


def test_ids_are_version_7_ascending_and_stamped_with_the_current_millisecond() -> None:
    before = time.time_ns() // 1_000_000
    made = time_ordered_ids(1_000)
    after = time.time_ns() // 1_000_000
    assert {each.version for each in made} == {7}
    assert {each.variant for each in made} == {uuid.RFC_4122}
    assert made == sorted(made)
    assert len(set(made)) == 1_000
    assert {before <= each.int >> 80 <= after for each in made} == {True}


def test_later_calls_sort_after_earlier_ones_and_two_calls_never_share_an_id() -> None:
    first = time_ordered_ids(100)
    time.sleep(0.002)
    second = time_ordered_ids(100)
    assert max(first) < min(second)
    assert not set(time_ordered_ids(10_000)) & set(time_ordered_ids(10_000))


@pytest.mark.parametrize("count", [1, 2, 70_000])
def test_counting_up_from_the_highest_start_never_reaches_the_variant_bits(
    monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    # The largest random draw: every id must still be a well-formed version 7 UUID. (ids
    # calls `os.urandom` through the module, so patching it there reaches ids.)
    monkeypatch.setattr(os, "urandom", lambda n: b"\xff" * n)
    made = time_ordered_ids(count)
    assert {each.version for each in made} == {7}
    assert {each.variant for each in made} == {uuid.RFC_4122}
    assert len(set(made)) == count
