"""A handler module for worker subprocess tests: a job that runs until its test opens a gate.

It lets a test hold a job in flight for as long as it needs, without guessing durations.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec

from jobqueue import JobContext, Registry

registry = Registry()


class Gate(msgspec.Struct, forbid_unknown_fields=True):
    # A file the test creates when the job may finish.
    path: str


@registry.handler("gated", payload=Gate)
async def gated(ctx: JobContext, payload: Gate) -> None:
    gate = Path(payload.path)
    while True:
        if await asyncio.to_thread(gate.exists):
            return
        await asyncio.sleep(0.05)
