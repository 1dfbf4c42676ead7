"""The prefetch depth: jobs claimed ahead only when the slots would otherwise wait."""

from __future__ import annotations

from jobqueue.entrypoints.worker.claim_sizing import AHEAD_PER_WORKER, Prefetch


def test_nothing_is_claimed_ahead_before_anything_was_measured() -> None:
    prefetch = Prefetch(workers=10)
    assert prefetch.depth == 0
    prefetch.claimed(0.002)
    assert prefetch.depth == 0  # no run time yet


def test_short_jobs_get_several_batches_ahead_and_no_more() -> None:
    prefetch = Prefetch(workers=10)
    prefetch.claimed(0.002)
    prefetch.ran(0.0001)  # each slot finishes 20 jobs while a claim is out
    assert prefetch.depth == AHEAD_PER_WORKER * 10 < 200


def test_long_jobs_get_none() -> None:
    prefetch = Prefetch(workers=10)
    prefetch.claimed(0.002)
    prefetch.ran(1.0)  # ten slots finish 0.02 jobs during one claim
    assert prefetch.depth == 0


def test_depth_is_what_the_slots_finish_during_one_claim() -> None:
    prefetch = Prefetch(workers=10)
    prefetch.claimed(0.003)
    prefetch.ran(0.01)  # each slot finishes 0.3 jobs while a claim is out
    assert prefetch.depth == 3


def test_depth_follows_jobs_that_get_longer() -> None:
    prefetch = Prefetch(workers=10)
    prefetch.claimed(0.002)
    prefetch.ran(0.0001)
    assert prefetch.depth == AHEAD_PER_WORKER * 10
    for _ in range(60):
        prefetch.ran(2.0)
    assert prefetch.depth == 0
