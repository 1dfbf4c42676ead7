"""How many jobs a pool claims, and how many claims it has on their way at once.

How far ahead of its free slots a pool claims: the prefetch depth.

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
# Claims on their way at once. With one, the database and this process take turns: the
# process runs what a claim brought while the database idles, then waits a round trip for
# the next batch. A second claim, sent once half a batch is wanted, overlaps the two; the
# jobs it may bring count against the same prefetch bound, so no more are held.
MAX_CLAIMS_IN_FLIGHT = 2


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


class ClaimSizing:
    """A pool's claims: how many jobs each asks for, and when a second may go out."""

    def __init__(self, workers: int) -> None:
        self._workers = workers
        self.prefetch = Prefetch(workers)

    def overlapping(self) -> bool:
        """Whether claims go out while another is on its way: when the round trip is what
        limits the pool, that is when the prefetch holds a pool's worth of jobs or more.
        Jobs that take longer than a claim are claimed one claim at a time."""
        return self.prefetch.depth >= self._workers

    def size(self) -> int:
        """The most one claim asks for: all the pool may hold, or half of it when claims
        go two at a time (`overlapping`)."""
        size = self._workers + self.prefetch.depth
        return -(-size // MAX_CLAIMS_IN_FLIGHT) if self.overlapping() else size

    def wanted(self, *, running: int, ready: int, requested: int, held: int) -> int:
        """How many jobs to claim now, with `running` attempts, `ready` jobs claimed ahead,
        `requested` by the claims on their way and `held` leases: enough for every free
        worker and the prefetch.

        While every worker is busy, the next claim waits until the prefetch is half used,
        so that claims come in batches rather than one per finished job. Outcomes not yet
        written count too: a pool whose writes lag (the database slow or away) claims no
        more than it can record.
        """
        workers, depth = self._workers, self.prefetch.depth
        # The jobs the claims on their way may bring count as claimed already.
        ahead = ready + requested
        if running >= workers and ahead > depth // 2:
            return 0
        # Held at most: a pool's worth running, the prefetch, and a pool's worth of
        # outcomes being written.
        return min(workers + depth - running - ahead, 2 * workers + depth - held - requested)

    def another(self, *, in_flight: int, backlog: bool, wanted: int) -> bool:
        """Whether a claim may go out beside the `in_flight` ones: only when claims
        overlap, under a `backlog` (the last claim came back full), and for half a batch
        or more; smaller ones would mostly add statements (and commits) per job."""
        return (
            self.overlapping()
            and backlog
            and in_flight < MAX_CLAIMS_IN_FLIGHT
            and wanted >= self.size()
        )


def _averaged(average: float | None, sample: float) -> float:
    return sample if average is None else average + _WEIGHT * (sample - average)
