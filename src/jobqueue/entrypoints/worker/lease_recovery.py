"""Lease recovery: gives jobs whose worker vanished back to the queue.

A worker that crashed, was killed or lost its database connection leaves its jobs
processing under a lease nobody will renew. Once the lease runs out the attempt is
counted as spent: the job goes back to pending, or to dead_letter after its last
attempt, so a job that kills its process every time still ends. Each job recovered is a
WARNING; a dead-lettered one is the failure line every failed job gets.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from jobqueue.domain.job import Job
from jobqueue.domain.ports import JobStore
from jobqueue.domain.status import FAILURES
from jobqueue.entrypoints.service.interval_loop import IntervalLoop
from jobqueue.entrypoints.worker.attempt import job_fields
from jobqueue.entrypoints.worker.ending_report import report_failure
from jobqueue.entrypoints.worker.observer import PoolObserver, guarded

_log = logging.getLogger("jobqueue.worker")


class LeaseRecovery:
    """Recovers expired leases on start and then every `interval`, until `stop()`.

    Several processes may run it against one store: each recovery is a conditional
    update, so a job is recovered once whoever gets there first.
    """

    def __init__(
        self,
        store: JobStore,
        interval: timedelta,
        *,
        batch_size: int = 500,
        observer: PoolObserver | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self._store = store
        self._batch_size = batch_size
        self._observer = guarded(observer)
        self._periodic = IntervalLoop(self.run_once, interval, name="lease recovery", logger=_log)

    def stop(self) -> None:
        self._periodic.stop()

    async def run(self) -> None:
        """Recover until `stop()`; store errors are logged and tried again next interval."""
        await self._periodic.run()

    async def run_once(self) -> int:
        """Recover batch after batch until no expired lease is left; return how many."""
        total = 0
        while True:
            jobs = await self._store.recover_expired(self._batch_size)
            if jobs:
                for job in jobs:
                    _log_recovered(job)
                self._observer.recovered(jobs)
                total += len(jobs)
            if len(jobs) < self._batch_size:
                return total


def _log_recovered(job: Job) -> None:
    # The worker that lost the job may be dead: whoever recovers it says it failed.
    if job.status in FAILURES:
        report_failure(job_fields(job), job.status, job.attempts, job.last_error)
        return
    _log.warning(
        "lease expired; job recovered to %s",
        job.status,
        extra={**job_fields(job), "status": job.status.value},
    )
