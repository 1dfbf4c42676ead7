"""Wake-ups: a submission wakes this process's pool directly and, through a coalesced
NOTIFY, the pools of the other processes; those listen for it (docs/design.md,
"Concurrency model"); the same listener hears pauses, cancels and the ends of jobs an
API's clients wait for. The notifier and the listener run as components of
`StopPhase.LAST`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from jobqueue.adapters.postgres.endings import EndingWatch
from jobqueue.adapters.postgres.listener import Listener, asyncpg_connect
from jobqueue.adapters.postgres.notify import CHANNEL, Notifier
from jobqueue.adapters.postgres.queries.jobs import CANCELS_CHANNEL, ENDINGS_CHANNEL
from jobqueue.adapters.postgres.queries.queues import PAUSES_CHANNEL
from jobqueue.entrypoints.service.components import StopPhase
from jobqueue.entrypoints.worker.cancels import CancelRouter
from jobqueue.entrypoints.worker.pauses import QueuePauses
from jobqueue.entrypoints.worker.pool import WorkerPool


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


def listening(
    url: str, pools: Sequence[WorkerPool], pauses: QueuePauses | None, waits: EndingWatch | None
) -> list[Listening]:
    """The listener of a process: its pools' wake-ups, pauses and cancels, and the ends
    of the jobs its API's clients wait for; none when it has neither."""
    # Every callback is given the notification's payload; a cancel's and an ending's
    # name a job, the others nothing.
    channels: dict[str, Callable[[str], None]] = {}
    wake = waking(pools)
    if wake is not None and pauses is not None:
        channels[CHANNEL] = lambda _: wake()
        channels[PAUSES_CHANNEL] = lambda _: pauses.changed()
        channels[CANCELS_CHANNEL] = CancelRouter(pools).heard
    if waits is not None:
        channels[ENDINGS_CHANNEL] = waits.heard
    if not channels:
        return []
    state = waits.listening if waits is not None else lambda _listening: None
    return [Listening(Listener(asyncpg_connect(url), channels, on_listening=state))]


def waking(pools: Sequence[WorkerPool]) -> Callable[[], None] | None:
    """What wakes every pool of this process (a wake-up does not say which queue it is
    for: each pool claims once, and those with nothing due go back to sleep)."""
    if not pools:
        return None

    def wake() -> None:
        for pool in pools:
            pool.wake()

    return wake


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
