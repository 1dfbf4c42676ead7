"""The rollup's writer in a worker process: its pools' attempts counted in memory
(`Counting`, a `PoolObserver`) and added to the store's rollup every few seconds and
once more at shutdown (`RollupFlusher`).

Nothing reaches the database on an attempt's path: counting is a dict lookup and a few
additions. The price is that a process killed outright (SIGKILL, a lost machine) loses
what it counted since its last flush, at most `FLUSH_INTERVAL` of its attempts; a flush
that fails keeps its counts for the next one.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta

from jobqueue.domain.attempts import Outcome
from jobqueue.domain.job import Job
from jobqueue.domain.outcome import Decision
from jobqueue.domain.ports import ThroughputRollup
from jobqueue.domain.status import Status
from jobqueue.domain.throughput import Tallies
from jobqueue.entrypoints.service.interval_loop import IntervalLoop
from jobqueue.entrypoints.worker.observer import NullObserver

_log = logging.getLogger("jobqueue.worker")

# Short enough that a chart's current minute fills in as it passes and a killed process
# loses little; long enough that a busy process's flush is one statement in thousands.
FLUSH_INTERVAL = timedelta(seconds=5)


class Counting(NullObserver):
    """Counts what pools and lease recovery observe into `tallies` (`PoolObserver`); the
    events it does not count are `NullObserver`'s."""

    def __init__(self, tallies: Tallies) -> None:
        self._tallies = tallies

    def attempt_started(self, job: Job) -> None:
        waited = job.pickup_latency
        if waited is not None:
            self._tallies.picked_up(job.queue, waited)

    def attempt_finished(self, job: Job, decision: Decision, duration_seconds: float) -> None:
        self._tallies.ended(job.queue, decision.outcome)

    def recovered(self, jobs: Sequence[Job]) -> None:
        # A job recovered on its last attempt ended dead-lettered with no worker to
        # report it: a failure like those workers write themselves.
        for job in jobs:
            if job.status is Status.DEAD_LETTER:
                self._tallies.ended(job.queue, Outcome.DEAD_LETTER)


class RollupFlusher:
    """Adds `tallies` to `rollup` every `interval`, and a last time when stopped (a
    component stopping after the pools, so their last attempts are in)."""

    def __init__(
        self,
        tallies: Tallies,
        rollup: ThroughputRollup,
        interval: timedelta = FLUSH_INTERVAL,
    ) -> None:
        self._tallies = tallies
        self._rollup = rollup
        self._loop = IntervalLoop(self.flush, interval, name="rollup flush", logger=_log)

    async def run(self) -> None:
        await self._loop.run()
        try:
            await self.flush()
        except Exception as error:
            _log.warning(
                "the last throughput counts could not be written; the dashboard misses them",
                extra={"error": f"{type(error).__name__}: {error}"},
            )

    def stop(self) -> None:
        self._loop.stop()

    async def flush(self) -> None:
        """Write what was counted since the last flush; kept for the next on failure."""
        taken = self._tallies.take()
        if not taken:
            return
        try:
            await self._rollup.add(taken)
        except BaseException:
            self._tallies.give_back(taken)
            raise
