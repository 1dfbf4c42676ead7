"""Work repeated every interval until stopped: the loop every maintenance service shares."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta

from jobqueue.adapters.telemetry.logging import log_failure
from jobqueue.domain.durations import format_duration


class IntervalLoop:
    """Runs `work` on start and then every `interval`, or sooner when `poke()`d, until
    `stop()`.

    A failed pass is logged (an outage without its traceback) and tried again next
    interval: a database that is away for a while must not end the loop, nor the process
    with it.
    """

    def __init__(
        self,
        work: Callable[[], Awaitable[object]],
        interval: timedelta,
        *,
        name: str,
        logger: logging.Logger,
    ) -> None:
        if interval <= timedelta(0):
            raise ValueError(f"the {name} interval must be positive")
        self._work = work
        self._interval = interval
        self._log = logger
        # Built once, not per failure: the interval never changes.
        self._failed = f"{name} failed; trying again in {format_duration(interval)}"
        self._stopping = asyncio.Event()
        # Ends the wait between passes: set by stop() and by poke().
        self._nudged = asyncio.Event()

    @property
    def stopping(self) -> bool:
        """Whether `stop()` was called; long passes check it between steps."""
        return self._stopping.is_set()

    def stop(self) -> None:
        self._stopping.set()
        self._nudged.set()

    def poke(self) -> None:
        """Run the next pass now (or, if one is running, right after it)."""
        self._nudged.set()

    async def run(self) -> None:
        while not self._stopping.is_set():
            self._nudged.clear()
            try:
                await self._work()
            except Exception as error:
                log_failure(self._log, self._failed, error)
            try:
                async with asyncio.timeout(self._interval.total_seconds()):
                    await self._nudged.wait()
            except TimeoutError:
                pass
