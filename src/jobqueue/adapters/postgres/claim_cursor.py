"""Where a process's next claim of a queue starts in the due index: in each range it reads
(a priority and a job type, in the order `domain/claims.py` gives), just after the last
job it claimed there, rather than at the range's start.

A claimed job leaves a dead entry at the head of the due index. A claim from the start
steps over every such entry until vacuum removes it, and while a long transaction holds
back the xmin horizon none can even be marked dead: measured over a 60 s hold, the
entries each claim read grew from 20 to 60,000 and the drain fell by 60-75 %. Starting
after the last key claimed (each range is keyed by `(run_at, id)`) skips them all.

Jobs can become due behind the cursor: a released job keeps its `run_at`, a submission
committed late carries its transaction's older `now()`, a row another claimer held and
then gave back was skipped. So the cursor goes back to the start whenever a claim comes
back short (nothing more due after it) and at least every `RESCAN_SECONDS`: such a job
waits at most that long for a pool that keeps finding work ahead of the cursor.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from uuid import UUID

from jobqueue.domain.claims import Range, claim_ranges
from jobqueue.domain.job import Job

RESCAN_SECONDS = 1.0
# Below every key: the start of a range.
START = (datetime.min.replace(tzinfo=UTC), UUID(int=0))

Key = tuple[datetime, UUID]


@dataclass(frozen=True, slots=True)
class Ranges:
    """The ranges one claim reads, in order, each with the key its scan starts after."""

    ranges: list[Range]
    after: list[Key]

    def from_start(self) -> Ranges:
        return Ranges(self.ranges, [START] * len(self.ranges))

    @property
    def at_start(self) -> bool:
        return all(key == START for key in self.after)


class ClaimCursor:
    """The ranges of a queue's next claim and the keys they start after, moved by what
    each claim returned; each claim starts one job type further on (`claim_ranges`)."""

    def __init__(
        self, *, rescan: float = RESCAN_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._rescan = rescan
        self._clock = clock
        self._after: dict[Range, Key] = {}
        self._turn = 0
        self._rescan_at = clock() + rescan

    def next(self, types: Collection[str]) -> Ranges:
        """The ranges the next claim reads, for a process that runs `types`."""
        now = self._clock()
        if now >= self._rescan_at:
            self._after = {}
            self._rescan_at = now + self._rescan
        ranges = claim_ranges(types, self._turn)
        self._turn += 1
        return Ranges(ranges, [self._after.get(each, START) for each in ranges])

    def claimed(self, jobs: Sequence[Job], limit: int) -> None:
        """A claim asked for `limit` jobs and got `jobs`, in claim order: the last of each
        range is where that range goes on."""
        if len(jobs) < limit:
            # Nothing more is due after the cursor; before it there may be.
            self._after = {}
            return
        for job in jobs:
            self._after[job.priority, job.type] = (job.run_at, job.id)
