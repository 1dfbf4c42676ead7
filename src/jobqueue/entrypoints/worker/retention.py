"""Retention: deletes finished jobs once they are old enough, so `jobs` stops growing.

Completed and failed jobs are kept for a while after they finish (to be looked up, and
to answer a repeated Idempotency-Key with the same job), then deleted; their keys are
free again. Dead-lettered jobs are never deleted automatically: they wait for a person
to inspect or retry them.

The dashboard's rollup (`domain/throughput.py`) is pruned in the same pass: its rows past
`ROLLUP_KEPT`, oldest first, in batches by its primary key's range, so it stays a couple
of days of rows per queue.

Several processes may prune one store at once: each batch locks its rows with SKIP
LOCKED, so they delete different rows and never wait for each other.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import timedelta

from jobqueue.domain.ports import JobStore, ThroughputRollup
from jobqueue.domain.retention import RetentionPolicy
from jobqueue.domain.status import Status
from jobqueue.domain.throughput import ROLLUP_KEPT
from jobqueue.entrypoints.service.interval_loop import IntervalLoop

_log = logging.getLogger("jobqueue.worker")

DEFAULT_INTERVAL = timedelta(minutes=1)
# Small enough that one delete holds its row locks briefly and a backlog never becomes
# one huge transaction; large enough that clearing a backlog takes few round trips.
DEFAULT_BATCH_SIZE = 1000

PrunedCallback = Callable[[Status, int], None]


class RetentionLoop:
    """Prunes on start and then every `interval`, until `stop()`."""

    def __init__(
        self,
        store: JobStore,
        policy: RetentionPolicy,
        interval: timedelta = DEFAULT_INTERVAL,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        on_pruned: PrunedCallback | None = None,
        rollup: ThroughputRollup | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self._store = store
        self._policy = policy
        self._batch_size = batch_size
        self._on_pruned = on_pruned
        self._rollup = rollup
        self._periodic = IntervalLoop(self.run_once, interval, name="retention", logger=_log)

    def stop(self) -> None:
        """Stop after the batch in progress, however large the backlog left."""
        self._periodic.stop()

    async def run(self) -> None:
        """Prune until `stop()`; store errors are logged and tried again next interval."""
        await self._periodic.run()

    async def run_once(self) -> Mapping[Status, int]:
        """Prune each status batch after batch until a batch comes back short, then the
        rollup's old rows; return how many jobs of each status were deleted."""
        pruned = dict.fromkeys(self._policy.ages, 0)
        try:
            for status, age in self._policy.ages.items():
                await self._prune(status, age, pruned)
        finally:
            # Also when a batch failed: what the batches before it deleted is gone.
            _log_pruned(pruned)
        await self._prune_rollup()
        await self._prune_key_starts()
        return pruned

    async def _prune_rollup(self) -> None:
        while self._rollup is not None and not self._periodic.stopping:
            count = await self._rollup.prune(ROLLUP_KEPT, self._batch_size)
            if count < self._batch_size:
                return

    async def _prune_key_starts(self) -> None:
        while not self._periodic.stopping:
            if await self._store.prune_key_starts(self._batch_size) < self._batch_size:
                return

    async def _prune(self, status: Status, age: timedelta, pruned: dict[Status, int]) -> None:
        # One status per call, so that every batch is counted against its own status.
        while not self._periodic.stopping:
            count = await self._store.prune_finished({status: age}, self._batch_size)
            pruned[status] += count
            if count:
                self._report(status, count)
            if count < self._batch_size:
                return

    def _report(self, status: Status, count: int) -> None:
        if self._on_pruned is None:
            return
        try:
            self._on_pruned(status, count)
        except Exception:
            # Metrics must not stop the deleting: the rows are gone either way.
            _log.exception("reporting pruned jobs failed", extra={"status": status.value})


def _log_pruned(pruned: Mapping[Status, int]) -> None:
    total = sum(pruned.values())
    if total:
        _log.info(
            "jobs pruned",
            extra={"count": total, "by_status": {s.value: n for s, n in pruned.items()}},
        )
