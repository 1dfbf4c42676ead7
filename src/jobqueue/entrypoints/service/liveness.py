"""A worker process's heartbeat in the process registry, and the watch that warns of
queues nobody consumes (`domain/processes.py`).

- `Heartbeat` writes the process's row at start and every third of `ttl`, with the
  attempts it is running, and removes it when the process stops; a process killed drops
  out once `ttl` passes. `GET /queues` counts a queue's consumers from these rows.
- `QueueWatch` asks every `interval` which queues have had due jobs for `grace` with no
  live consumer, and logs a WARNING for each: once per queue and episode, in one process
  of all those watching (the store flags the queue by compare-and-swap).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import timedelta

from jobqueue.domain.errors import StoreError
from jobqueue.domain.ports import ProcessRegistry
from jobqueue.domain.processes import UNCONSUMED_GRACE, ProcessInfo
from jobqueue.entrypoints.service.interval_loop import IntervalLoop

_log = logging.getLogger("jobqueue")

WATCH_INTERVAL = timedelta(seconds=10)
# How long a stopping process waits to remove its row; past it, its expiry does.
LEAVE_WITHIN = 2.0


class Heartbeat:
    """Keeps `describe()`'s process in the registry while it runs (`run` until `stop`)."""

    def __init__(
        self,
        registry: ProcessRegistry,
        describe: Callable[[], ProcessInfo],
        ttl: timedelta,
    ) -> None:
        self._registry = registry
        self._describe = describe
        self._ttl = ttl
        self._loop = IntervalLoop(self._beat, ttl / 3, name="process heartbeat", logger=_log)

    async def run(self) -> None:
        await self._loop.run()
        try:
            async with asyncio.timeout(LEAVE_WITHIN):
                await self._registry.leave(self._describe().id)
        except (StoreError, TimeoutError) as error:
            _log.info("could not remove this process from the registry (%s); it expires", error)

    def stop(self) -> None:
        self._loop.stop()

    async def _beat(self) -> None:
        await self._registry.heartbeat(self._describe(), self._ttl)


class QueueWatch:
    """Warns of each queue whose due jobs no live process will claim."""

    def __init__(
        self,
        registry: ProcessRegistry,
        *,
        interval: timedelta = WATCH_INTERVAL,
        grace: timedelta = UNCONSUMED_GRACE,
    ) -> None:
        self._registry = registry
        self._grace = grace
        self._loop = IntervalLoop(self._look, interval, name="queue watch", logger=_log)

    async def run(self) -> None:
        await self._loop.run()

    def stop(self) -> None:
        self._loop.stop()

    async def _look(self) -> None:
        for queue in await self._registry.newly_unconsumed(self._grace):
            _log.warning(
                "queue %r has due jobs and no live process consumes it: they wait until a "
                "worker started with this queue in QUEUES runs",
                queue.queue,
                extra={"queue": queue.queue, "due": queue.due},
            )
