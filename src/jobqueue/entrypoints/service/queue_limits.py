"""A worker process's declared queue limits (`Registry.limit` in code, QUEUE_LIMITS in
settings, the latter winning queue by queue), written as it starts (`domain/flow.py`).

Each queue the process consumes gets the limits declared for it, or none: so removing a
queue's limits from the settings lifts them at the next deploy. A queue whose limits an
operator set keeps them (the store leaves them alone), and the process says so. With
several processes declaring differently, the last to start wins: declare the same
everywhere. The process's pools claim only once its declaration is written
(`AfterDeclaration`), so that its first claims already obey what it declares.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Mapping
from datetime import timedelta

from jobqueue.domain.flow import NO_LIMITS, QueueLimits
from jobqueue.domain.ports import JobStore
from jobqueue.entrypoints.service.components import Runnable
from jobqueue.entrypoints.service.interval_loop import IntervalLoop

_log = logging.getLogger("jobqueue")

RETRY_EVERY = timedelta(seconds=5)


def declared_limits(
    in_code: Mapping[str, QueueLimits],
    in_settings: Collection[tuple[str, QueueLimits]],
    consumed: Collection[str],
) -> dict[str, QueueLimits]:
    """The limits to write, by queue: those declared, settings over code, and none for a
    consumed queue declared nowhere."""
    return {**dict.fromkeys(consumed, NO_LIMITS), **in_code, **dict(in_settings)}


class LimitsDeclaration:
    """Writes `limits` once the store takes them (at start; again every `retry_every`
    while it is away), then idles until stopped."""

    def __init__(
        self,
        store: JobStore,
        limits: Mapping[str, QueueLimits],
        retry_every: timedelta = RETRY_EVERY,
    ) -> None:
        self._store = store
        self._left = dict(limits)
        # Set once every queue's limits are written.
        self.declared = asyncio.Event()
        self._periodic = IntervalLoop(
            self._declare, retry_every, name="declaring queue limits", logger=_log
        )

    async def run(self) -> None:
        await self._periodic.run()

    def stop(self) -> None:
        self._periodic.stop()

    async def _declare(self) -> None:
        for queue, limits in list(self._left.items()):
            state = await self._store.declare_queue_limits(queue, limits)
            del self._left[queue]
            if limits.any and state is None:
                _log.info(
                    "queue %s keeps the limits an operator set; ignoring those declared here",
                    queue,
                    extra={"queue": queue, "declared": str(limits)},
                )
            elif limits.any:
                _log.info("queue limits declared", extra={"queue": queue, "limits": str(limits)})
        self.declared.set()


class AfterDeclaration:
    """`target` (a worker pool), run once `declaration` is written, unless stopped first:
    a process whose pools claimed at once could take a queue's jobs before its declared
    limits were in the queue's row."""

    def __init__(self, target: Runnable, declaration: LimitsDeclaration) -> None:
        self._target = target
        self._declared = declaration.declared
        self._stopped = asyncio.Event()

    async def run(self) -> None:
        declared = asyncio.ensure_future(self._declared.wait())
        stopped = asyncio.ensure_future(self._stopped.wait())
        try:
            await asyncio.wait((declared, stopped), return_when=asyncio.FIRST_COMPLETED)
        finally:
            declared.cancel()
            stopped.cancel()
        if not self._stopped.is_set():
            await self._target.run()

    def stop(self) -> None:
        self._stopped.set()
        self._target.stop()
