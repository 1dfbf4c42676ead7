"""Where a process's next claim of a queue starts in the due index: in each priority's
range, just after the last job it claimed there, rather than at the range's start.

A claimed job leaves a dead entry at the head of the due index. A claim from the start
steps over every such entry until vacuum removes it, and while a long transaction holds
back the xmin horizon none can even be marked dead: measured over a 60 s hold, the
entries each claim read grew from 20 to 60,000 and the drain fell by 60-75 %. Starting
after the last key claimed (the index is keyed by `(run_at, id)`) skips them all.

Jobs can become due behind the cursor: a released job keeps its `run_at`, a submission
committed late carries its transaction's older `now()`, a row another claimer held and
then gave back was skipped. So the cursor goes back to the start whenever a claim comes
back short (nothing more due after it) and at least every `RESCAN_SECONDS`: such a job
waits at most that long for a pool that keeps finding work ahead of the cursor.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from uuid import UUID

from jobqueue.domain.job import PRIORITIES, Job

RESCAN_SECONDS = 1.0
# Below every key: the start of a priority's range.
START = (datetime.min.replace(tzinfo=UTC), UUID(int=0))

Key = tuple[datetime, UUID]
# One key per priority, in `PRIORITIES` order.
Keys = tuple[Key, ...]
FROM_START: Keys = tuple(START for _ in PRIORITIES)
_INDEX = {priority: index for index, priority in enumerate(PRIORITIES)}


class ClaimCursor:
    """The keys a claim starts after, one per priority, moved by what each claim
    returned."""

    def __init__(
        self, *, rescan: float = RESCAN_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._rescan = rescan
        self._clock = clock
        self._after: Keys = FROM_START
        self._rescan_at = clock() + rescan

    def after(self) -> Keys:
        """The keys the next claim starts after."""
        now = self._clock()
        if now >= self._rescan_at:
            self._after = FROM_START
            self._rescan_at = now + self._rescan
        return self._after

    def claimed(self, jobs: Sequence[Job], limit: int) -> None:
        """A claim asked for `limit` jobs and got `jobs`, in claim order (by priority,
        then due key): the last of each priority is where its range goes on."""
        if len(jobs) < limit:
            # Nothing more is due after the cursor; before it there may be.
            self._after = FROM_START
            return
        keys = list(self._after)
        for job in jobs:
            keys[_INDEX[job.priority]] = (job.run_at, job.id)
        self._after = tuple(keys)
