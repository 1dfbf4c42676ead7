"""How far ahead of its free slots a pool claims: the prefetch depth.

A slot that frees up should find its next job already claimed, not wait a round trip for
it. A job claimed ahead of need, though, waits in this process while another process
might have run it, so the pool claims ahead only what its slots are expected to finish
during one claim's round trip: `workers × claim time / run time`, capped at
`AHEAD_PER_WORKER × workers`. Short jobs, for which the round trip is what limits
throughput, get several batches ahead, so that each round trip claims (and, carried on
the claim, records) many jobs at once; jobs that run for seconds or more get none, and
are claimed only for slots that are free.

Both times are moving averages of what this pool measured, so the depth follows the
load: when the jobs get longer, it shrinks within a few attempts.
"""

from __future__ import annotations

import math

# Weight of each new measurement in the moving averages: about the last ten count.
_WEIGHT = 0.1
# The most a pool holds ahead, per worker; it binds only for jobs much shorter than a
# claim's round trip (no-ops). No-op jobs, 10 workers, one process: with 1 (a single batch
# ahead) each claim took ~10 jobs and the drain sent 0.1 statements per job; with 4, ~25
# jobs and 0.05; with 8 (two claims in flight, each asking for half of what the pool may
# hold), the second claim is sent more often while the first is on its way: 10-30 % more
# jobs/s in six of six alternating dev drains, at 10-20 % less database CPU per job; 16
# was no better than 8. A wrong guess (the jobs got longer) costs at most a second: jobs
# not started by then are given back (`PREFETCH_HOLD_SECONDS`).
AHEAD_PER_WORKER = 8


class Prefetch:
    """The number of jobs to hold claimed beyond the free slots."""

    def __init__(self, workers: int) -> None:
        self._workers = workers
        self._claim: float | None = None
        self._run: float | None = None

    def claimed(self, seconds: float) -> None:
        """A claim took `seconds`, from sending it to having its jobs."""
        self._claim = _averaged(self._claim, seconds)

    def ran(self, seconds: float) -> None:
        """A handler ran for `seconds`."""
        self._run = _averaged(self._run, seconds)

    @property
    def depth(self) -> int:
        if self._claim is None or self._run is None:
            return 0  # nothing measured yet: claim for free slots only
        # A handler that takes no measurable time still lets one slot finish a job per
        # turn of the loop; the floor keeps the ratio finite.
        expected = self._workers * self._claim / max(self._run, 1e-6)
        # Rounded, not raised: half a job expected per claim is not worth holding one.
        return min(AHEAD_PER_WORKER * self._workers, math.floor(expected + 0.5))


def _averaged(average: float | None, sample: float) -> float:
    return sample if average is None else average + _WEIGHT * (sample - average)
