"""Queue pauses, as every pool of a worker process sees them.

The claim itself checks the pause in the database, so a paused queue loses no job to a
process that has not heard yet. What a process must learn quickly is the rest: to stop
sending claims, to give back the jobs it claimed ahead, and to claim again at once on
resume. It learns from the notification a pause or resume sends at commit, and re-reads
the pauses every `PAUSE_CHECK_INTERVAL` in case one was lost.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import Protocol

from jobqueue.adapters.telemetry.logging import Outage
from jobqueue.domain.errors import StoreError, StoreUnavailable
from jobqueue.domain.ports import JobStore
from jobqueue.entrypoints.service.interval_loop import IntervalLoop

_log = logging.getLogger("jobqueue.worker")

# Within a second of a pause, every process knows, even with no notification: twice as
# often, so that a read and its round trip fit inside that second too.
PAUSE_CHECK_INTERVAL = timedelta(milliseconds=500)


class Pausable(Protocol):
    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def wake(self) -> None: ...


class QueuePauses:
    """Pauses and resumes each pool (`pools`, by the queue it consumes) as the store says,
    on start, when `changed()` is called (a notification), and every `interval`.

    While the store cannot be read, each pool keeps the state last read: the claim still
    refuses a paused queue, and a resumed one is claimed from once the store answers.
    """

    def __init__(
        self,
        store: JobStore,
        pools: Mapping[str, Pausable],
        interval: timedelta = PAUSE_CHECK_INTERVAL,
    ) -> None:
        self._store = store
        self._pools = dict(pools)
        self._periodic = IntervalLoop(
            self.refresh, interval, name="reading queue pauses", logger=_log
        )
        # Once per outage, without a traceback: a read every half second would otherwise
        # log two a second.
        self._outage = Outage(
            _log,
            "could not read queue pauses; each queue keeps its last known state",
            ended="queue pauses are read again",
        )

    def changed(self) -> None:
        """A pause, a resume or a queue's limits were announced: read the pauses now, and
        let every pool claim again (one a limit held back may claim more now)."""
        self._periodic.poke()
        for pool in self._pools.values():
            pool.wake()

    async def run(self) -> None:
        await self._periodic.run()

    def stop(self) -> None:
        self._periodic.stop()

    async def refresh(self) -> None:
        try:
            paused = await self._store.paused_queues(list(self._pools))
        except (StoreUnavailable, StoreError) as error:
            self._outage.failed(str(error))
            return
        self._outage.ok()
        for queue, pool in self._pools.items():
            if queue in paused:
                pool.pause()
            else:
                pool.resume()
