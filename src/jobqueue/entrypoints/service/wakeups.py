"""Wake-ups: a submission wakes this process's pool directly and, through a coalesced
NOTIFY, the pools of the other processes; those listen for it (docs/design.md,
"Concurrency model"). The notifier and the listener run as components of `StopPhase.LAST`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from jobqueue.adapters.postgres.notify import Listener, Notifier
from jobqueue.entrypoints.service.components import StopPhase


class Announcing:
    """Runs the API side's `Notifier`. Stopped after the API, it sends what is still owed,
    so the last submissions before a shutdown are announced too; forced (cancelled), it
    sends nothing more."""

    name = "wake-up notifier"
    phase = StopPhase.LAST

    def __init__(self, notifier: Notifier) -> None:
        self._notifier = notifier
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        self._notifier.start()
        try:
            await self._stopping.wait()
        except asyncio.CancelledError:
            await self._notifier.aclose(flush=False)
            raise
        await self._notifier.aclose(flush=True)

    def stop(self) -> None:
        self._stopping.set()


class Listening:
    """Runs a worker process's `Listener`, which wakes its pool on every notification."""

    name = "wake-up listener"
    phase = StopPhase.LAST

    def __init__(self, listener: Listener) -> None:
        self._listener = listener
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        self._listener.start()
        try:
            await self._stopping.wait()
        finally:
            await self._listener.aclose()

    def stop(self) -> None:
        self._stopping.set()


def announcer(
    wake_pool: Callable[[], None] | None, notifier: Notifier | None
) -> Callable[[], None] | None:
    """What a submission calls: this process's pool is woken directly, the others
    through the notifier (which `serve` runs too, for the other replicas)."""
    wakes: list[Callable[[], None]] = []
    if wake_pool is not None:
        wakes.append(wake_pool)
    if notifier is not None:
        wakes.append(notifier.job_available)
    if not wakes:
        return None

    def announce() -> None:
        for wake in wakes:
            wake()

    return announce
