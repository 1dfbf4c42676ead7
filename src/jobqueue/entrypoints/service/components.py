"""Components: the long-running parts of a service process, and the order they stop in.

A component runs until it is told to stop (`run` returns soon after `stop`), and says in
which `StopPhase` of the shutdown it is told. The composition root builds an ordered list of
them; `run_components` runs the list until a signal and then stops it phase by phase:

1. `StopPhase.SIGNAL`: at once. `/readyz` turns 503; the pool, lease recovery and retention
   stop claiming (running jobs get SHUTDOWN_TIMEOUT, counted from the signal).
2. `StopPhase.DRAINED`: once `drain_delay` has passed (skipped when nothing of this phase is
   running any more), so load balancers have noticed `/readyz`: the API's HTTP server
   stops accepting connections and finishes the requests in flight.
3. `StopPhase.LAST`: once every component of an earlier phase has returned: the METRICS_ADDR
   listener and the queue-depth refresher (the final counters stay scrapeable while the
   pool drains), the wake-up notifier (flushed after the API stopped, so the last
   submissions are announced too) and the wake-up listener.

A component returning before the signal is a failure: the others are stopped as above,
and its error, if it raised one, is re-raised (`StartupError` as it is, anything else
wrapped in one). Forcing (a second signal) cancels the main task: every component's task
is cancelled and nothing waits for a phase.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from jobqueue.entrypoints.service.runtime import Signals, StartupError

_log = logging.getLogger("jobqueue")


class StopPhase(enum.IntEnum):
    """When, in the shutdown, a component is told to stop; phases run in this order."""

    SIGNAL = 1
    DRAINED = 2
    LAST = 3


class Component(Protocol):
    """A part of the service that runs until `stop` (see the module docstring)."""

    @property
    def name(self) -> str:
        """Names its task and the log lines about it (`"worker pool"`)."""
        ...

    @property
    def phase(self) -> StopPhase:
        """The shutdown phase in which `stop` is called."""
        ...

    async def run(self) -> None:
        """Run until stopped; returning earlier, or raising, shuts the process down."""
        ...

    def stop(self) -> None:
        """Ask `run` to return; must not block or raise."""
        ...


class Runnable(Protocol):
    async def run(self) -> None: ...

    def stop(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Loop:
    """A component of an object that already runs until its own `stop` (the worker pool,
    the periodic loops)."""

    name: str
    phase: StopPhase
    target: Runnable

    async def run(self) -> None:
        await self.target.run()

    def stop(self) -> None:
        self.target.stop()


class OnStop:
    """A component with nothing to run, only something to do when told to stop
    (`/readyz` turning 503 at the signal)."""

    def __init__(self, name: str, phase: StopPhase, action: Callable[[], None]) -> None:
        self.name = name
        self.phase = phase
        self._action = action
        self._stopped = asyncio.Event()

    async def run(self) -> None:
        await self._stopped.wait()

    def stop(self) -> None:
        self._action()
        self._stopped.set()


@dataclass(frozen=True, slots=True)
class _Running:
    component: Component
    task: asyncio.Task[None]


async def run_components(
    components: Sequence[Component], signals: Signals, *, drain_delay: timedelta
) -> None:
    """Run `components` until the first signal (or until one of them returns), then stop
    them phase by phase and wait for all. Raises `StartupError` for a failed component."""
    running = [
        _Running(component, asyncio.create_task(component.run(), name=f"jobqueue {component.name}"))
        for component in components
    ]
    try:
        ended = await _until_signal_or_exit(signals, running)
        if ended is not None:
            _log.error("%s stopped unexpectedly; shutting down", ended)
        for phase in StopPhase:
            members = [entry for entry in running if entry.component.phase is phase]
            if not members:
                continue
            await _before_stopping(phase, members, running, drain_delay)
            for entry in members:
                entry.component.stop()
        if running:
            await asyncio.wait([entry.task for entry in running])
    finally:
        for entry in running:
            entry.task.cancel()
        await asyncio.gather(*(entry.task for entry in running), return_exceptions=True)
    for entry in running:
        failure = None if entry.task.cancelled() else entry.task.exception()
        if isinstance(failure, StartupError):
            raise failure
        if failure is not None:
            raise StartupError(f"a component failed: {type(failure).__name__}: {failure}")


async def _before_stopping(
    phase: StopPhase, members: list[_Running], running: list[_Running], drain_delay: timedelta
) -> None:
    """What the shutdown waits for before it stops the components of `phase`."""
    match phase:
        case StopPhase.SIGNAL:
            pass
        case StopPhase.DRAINED:
            delay = drain_delay.total_seconds()
            serving = [entry.component.name for entry in members if not entry.task.done()]
            if delay > 0 and serving:
                _log.info("draining: still serving %s for %gs", ", ".join(serving), delay)
                await asyncio.sleep(delay)
        case StopPhase.LAST:
            earlier = [entry.task for entry in running if entry.component.phase < StopPhase.LAST]
            if earlier:
                await asyncio.wait(earlier)


async def _until_signal_or_exit(signals: Signals, running: list[_Running]) -> str | None:
    """Wait for the first signal; return the name of a component that ended before it."""
    signalled = asyncio.create_task(signals.requested.wait())
    try:
        done, _ = await asyncio.wait(
            [signalled, *(entry.task for entry in running)], return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        signalled.cancel()
    for entry in running:
        if entry.task in done:
            return entry.component.name
    return None
