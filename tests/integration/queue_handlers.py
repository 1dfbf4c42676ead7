"""A handler module for the queue tests: one job type per queue, each attempt noting, in
a file named by the environment, how many attempts of its queue were running with it."""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from pathlib import Path

from jobqueue import JobContext, Registry

registry = Registry()
_running: Counter[str] = Counter()


def _sample(queue: str) -> None:
    # A line is tiny and the file local: written at once, on the loop, so that the sample
    # is taken exactly when the attempt starts.
    with Path(os.environ["QUEUE_SAMPLES"]).open("a", encoding="utf-8") as samples:
        samples.write(f"{queue} {_running[queue]}\n")


async def _note(queue: str) -> None:
    _running[queue] += 1
    try:
        _sample(queue)
        await asyncio.sleep(0.05)
    finally:
        _running[queue] -= 1


@registry.handler("on_a", queue="a")
async def on_a(ctx: JobContext, payload: object) -> None:
    await _note("a")


@registry.handler("on_b", queue="b", priority=2)
async def on_b(ctx: JobContext, payload: object) -> None:
    await _note("b")
