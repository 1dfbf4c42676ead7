"""Handlers for the cancel and snooze process tests (`--handlers
tests.integration.cancel_handlers`)."""

from __future__ import annotations

import asyncio

import msgspec

from jobqueue import JobContext, Registry, Snooze

MODULE = "tests.integration.cancel_handlers"

registry = Registry()


class Stubborn(msgspec.Struct, forbid_unknown_fields=True):
    seconds: float
    # How long it goes on after it was told to stop, before it returns as if it succeeded.
    late: float


@registry.handler("stubborn", payload=Stubborn)
async def stubborn(ctx: JobContext, payload: Stubborn) -> None:
    """Runs `seconds`; told to stop, logs it, goes on for `late` seconds and returns:
    the late return of a handler that ignores its cancellation."""
    try:
        await asyncio.sleep(payload.seconds)
    except asyncio.CancelledError:
        # In the message: a LoggerAdapter's own fields replace a call's `extra`.
        ctx.logger.info("handler told to stop: %s", ctx.stop.reason)
        await asyncio.sleep(payload.late)


class NotYet(msgspec.Struct, forbid_unknown_fields=True):
    # Snoozes this many times (for `seconds` each), then completes.
    times: int
    seconds: float


@registry.handler("not_yet", payload=NotYet)
async def not_yet(ctx: JobContext, payload: NotYet) -> Snooze | None:
    if ctx.snoozes < payload.times:
        return Snooze(payload.seconds)
    return None
