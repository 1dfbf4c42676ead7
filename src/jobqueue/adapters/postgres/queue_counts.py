"""The counts per queue a page shows, recounted in the background rather than per view.

Counting a queue's pending and dead-lettered jobs reads every entry of their indexes:
about a second with 500,000 pending and 100,000 dead-lettered jobs (measured by `jobqueue
bench dashboard`), far too slow for a page several people refresh every few seconds.
While a count takes less than `INLINE_BELOW`, as on most tables, every view counts; once
it takes longer, a view that accepts counts `max_age` old gets the last ones at once,
and starts a recount when they are older (one at a time per process): the next view
shows it. The recount
is spaced by ten times its own duration at least, so that on a table where it takes a
second it takes at most a tenth of a database core, however many pages are open.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, Final

_log = logging.getLogger("jobqueue.queues")

Rows = Sequence[Mapping[str, Any]]

# A recount waits at least this many times its own last duration after the previous one.
SPACING: Final = 10
# A count quicker than this is made at every view: exact, and cheap enough (seconds).
INLINE_BELOW: Final = 0.025


class CountCache:
    """The last rows of `count` and when they were read, refreshed as `rows` says."""

    def __init__(
        self, count: Callable[[], Awaitable[Rows]], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._count = count
        self._clock = clock
        self._rows: Rows | None = None
        self._counted_at = 0.0
        self._took = 0.0
        self._recount: asyncio.Task[None] | None = None

    async def rows(self, max_age: timedelta) -> tuple[Rows, timedelta]:
        """The last counts and how old they are: counted now when there are none yet or
        counting is quick, else as they are, a recount started when they are older than
        `max_age`."""
        if self._rows is None or (self._took < INLINE_BELOW and self._recount is None):
            await self._refresh()
        elif self._stale(max_age) and self._recount is None:
            self._recount = asyncio.create_task(self._refresh(), name="queue recount")
            self._recount.add_done_callback(self._recounted)
        assert self._rows is not None
        return self._rows, timedelta(seconds=self._clock() - self._counted_at)

    def _stale(self, max_age: timedelta) -> bool:
        wait = max(max_age.total_seconds(), SPACING * self._took)
        return self._clock() - self._counted_at >= wait

    async def _refresh(self) -> None:
        started = self._clock()
        rows = await self._count()
        self._rows, self._counted_at, self._took = rows, started, self._clock() - started

    def _recounted(self, task: asyncio.Task[None]) -> None:
        self._recount = None
        if not task.cancelled() and task.exception() is not None:
            # The page keeps its last counts; the database's trouble shows elsewhere
            # (/readyz, the store's own errors), and the next view tries again.
            _log.warning("queue recount failed", extra={"error": type(task.exception()).__name__})
