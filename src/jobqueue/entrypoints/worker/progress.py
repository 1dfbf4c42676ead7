"""Progress reports: what handlers say of how far they got (`JobContext.progress`),
written at most once per interval per pool, the latest report of each attempt only.

A handler may report at every step of a loop; the store sees one statement per second
at most, whatever the number of attempts reporting (`JobStore.record_progress`, fenced
by each lease, so the report of an attempt that lost its job is dropped). The last
report an attempt made and the writer had not written yet is taken by its ending
(`take`), which writes it with the job's end: a job keeps the last report its handler
made. A report is for people watching: a failed write is logged and not retried (the
next report is written instead).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import timedelta

from jobqueue.adapters.postgres.failures import reason
from jobqueue.adapters.telemetry.logging import Outage
from jobqueue.domain.job import Lease
from jobqueue.domain.ports import JobStore
from jobqueue.domain.progress import Progress

_log = logging.getLogger("jobqueue.worker")

# "About once a second", as a person watching a job would see it move.
DEFAULT_PROGRESS_INTERVAL = timedelta(seconds=1)


class ProgressWriter:
    """Writes the latest report of each of a pool's attempts, one statement per interval."""

    def __init__(
        self,
        store: JobStore,
        timeout: timedelta,
        *,
        interval: timedelta = DEFAULT_PROGRESS_INTERVAL,
    ) -> None:
        self._store = store
        self._timeout = timeout.total_seconds()
        self._interval = interval.total_seconds()
        # The latest report of each attempt not written yet.
        self._latest: dict[Lease, Progress] = {}
        self._task: asyncio.Task[None] | None = None
        self._outage = Outage(
            _log,
            "could not write jobs' progress; their records show an older report",
            ended="jobs' progress is written again",
        )

    def reporter(self, lease: Lease) -> Callable[[Progress], None]:
        """Where an attempt's reports go: callable from the event loop or from a sync
        handler's thread."""
        loop = asyncio.get_running_loop()

        def report(progress: Progress) -> None:
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                self._report(lease, progress)
            else:
                # From a sync handler's thread: in order with its return, which reaches
                # the loop the same way, so the ending finds its last report (`take`).
                loop.call_soon_threadsafe(self._report, lease, progress)

        return report

    def take(self, lease: Lease) -> Progress | None:
        """The attempt's last report not written yet, for its ending to write; from now
        on nothing more is written for it."""
        return self._latest.pop(lease, None)

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def _report(self, lease: Lease, progress: Progress) -> None:
        self._latest[lease] = progress
        if self._task is None:
            self._task = asyncio.create_task(self._write_all(), name="jobqueue progress")

    async def _write_all(self) -> None:
        try:
            while self._latest:
                batch = list(self._latest.items())
                self._latest.clear()
                try:
                    async with asyncio.timeout(self._timeout):
                        await self._store.record_progress(batch)
                except Exception as error:
                    self._outage.failed(reason(error))
                else:
                    self._outage.ok()
                # Reports made meanwhile wait for the interval's end: one write per
                # interval, whatever the number of reports.
                await asyncio.sleep(self._interval)
        finally:
            self._task = None
