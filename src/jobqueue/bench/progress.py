"""A liveness line on stderr for the long phases, so a minutes-long run never looks hung.

On a terminal the line is rewritten in place; into a file or a pipe (a background run)
it becomes one line every few seconds, so the log stays readable.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TextIO

_TERMINAL_EVERY = 0.2
_LOG_EVERY = 5.0


class ProgressLine:
    def __init__(self, label: str, total: int | None, stream: TextIO = sys.stderr) -> None:
        self._label = label
        self._total = total
        self._stream = stream
        self._tty = stream.isatty()
        self._every = _TERMINAL_EVERY if self._tty else _LOG_EVERY
        self._started = time.perf_counter()
        self._shown = self._started
        self._done = 0
        self._width = 0

    def advance(self, count: int = 1) -> None:
        self.update(self._done + count)

    def update(self, done: int) -> None:
        self._done = done
        now = time.perf_counter()
        if now - self._shown >= self._every:
            self._shown = now
            self._show(self._line(now), final=False)

    def finish(self) -> None:
        self._show(self._line(time.perf_counter()), final=True)

    def _line(self, now: float) -> str:
        elapsed = now - self._started
        if self._total is None:
            return f"  {self._label}: {elapsed:.0f}s"
        rate = self._done / elapsed if elapsed > 0 else 0.0
        return f"  {self._label}: {self._done:,}/{self._total:,}  {rate:,.0f}/s  {elapsed:.1f}s"

    def _show(self, line: str, *, final: bool) -> None:
        if self._tty:
            # Pad over the previous, possibly longer, line.
            padded = line.ljust(self._width)
            self._width = len(line)
            self._stream.write("\r" + padded + ("\n" if final else ""))
        else:
            self._stream.write(line + "\n")
        self._stream.flush()


@asynccontextmanager
async def progress(label: str, total: int | None = None) -> AsyncIterator[ProgressLine]:
    """A progress line for a phase; for one long statement (`total` None) it ticks by
    itself, showing the time elapsed."""
    shown = ProgressLine(label, total)
    ticker = asyncio.create_task(_tick(shown)) if total is None else None
    try:
        yield shown
    finally:
        if ticker is not None:
            ticker.cancel()
        shown.finish()


async def _tick(shown: ProgressLine) -> None:
    while True:
        await asyncio.sleep(_TERMINAL_EVERY)
        shown.update(0)
