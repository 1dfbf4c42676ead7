"""The `sleep` example handler: waits for a Go-style duration, e.g. `{"duration": "1m30s"}`."""

from __future__ import annotations

import asyncio

import msgspec

from jobqueue.domain.durations import parse_duration
from jobqueue.domain.errors import Permanent
from jobqueue.domain.registry import JobContext


class SleepPayload(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    duration: str

    def __post_init__(self) -> None:
        # msgspec reports a ValueError raised here as a validation error, so a bad
        # duration is refused at submission instead of failing later in a worker.
        parse_duration(self.duration)


async def handle_sleep(ctx: JobContext, payload: SleepPayload) -> None:
    """Sleep for `payload.duration`; cancellation (timeout, shutdown) interrupts it at once."""
    try:
        delay = parse_duration(payload.duration)
    except ValueError as error:
        # Only reachable by a payload that skipped validation; retrying cannot fix it.
        raise Permanent(f"cannot sleep: {error}") from error
    await asyncio.sleep(delay.total_seconds())
