"""The shutdown sequence, driven by the components' phases (`entrypoints/components.py`),
with components that only record what happens to them."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest

from jobqueue.adapters.postgres.notify import Notifier
from jobqueue.entrypoints.service.components import (
    Component,
    Loop,
    OnStop,
    StopPhase,
    run_components,
)
from jobqueue.entrypoints.service.runtime import Signals, StartupError
from jobqueue.entrypoints.service.wakeups import Announcing

NO_DELAY = timedelta(0)


class Recorded:
    """Runs until stopped, then takes `linger` seconds to return (a draining pool, a
    server finishing its requests); every step is written to the shared `events`."""

    def __init__(
        self, name: str, phase: StopPhase, events: list[str], *, linger: float = 0.0
    ) -> None:
        self.name = name
        self.phase = phase
        self._events = events
        self._linger = linger
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        self._events.append(f"{self.name} started")
        await self._stopping.wait()
        await asyncio.sleep(self._linger)
        self._events.append(f"{self.name} returned")

    def stop(self) -> None:
        self._events.append(f"{self.name} stopped")
        self._stopping.set()


class EndingEarly:
    """Returns, or raises, on its own, before any signal."""

    phase = StopPhase.SIGNAL

    def __init__(self, name: str, error: BaseException | None = None) -> None:
        self.name = name
        self._error = error

    async def run(self) -> None:
        await asyncio.sleep(0)
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        pass


def signalled_soon(delay: float = 0.01) -> Signals:
    signals = Signals()
    asyncio.get_running_loop().call_later(delay, signals.requested.set)
    return signals


async def test_components_stop_phase_by_phase_after_the_signal() -> None:
    events: list[str] = []
    components = [
        Recorded("pool", StopPhase.SIGNAL, events, linger=0.1),
        Recorded("http", StopPhase.DRAINED, events),
        Recorded("metrics", StopPhase.LAST, events),
    ]

    await run_components(components, signalled_soon(), drain_delay=timedelta(milliseconds=20))

    assert events[:3] == ["pool started", "http started", "metrics started"]
    assert events[3:] == [
        "pool stopped",
        # The API stops after the drain delay, while the pool is still finishing.
        "http stopped",
        "http returned",
        "pool returned",
        # The metrics listener only once every other component has returned.
        "metrics stopped",
        "metrics returned",
    ]


async def test_the_drain_delay_keeps_http_serving_after_the_signal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events: list[str] = []
    components = [Recorded("http", StopPhase.DRAINED, events)]
    loop = asyncio.get_running_loop()
    signals = signalled_soon()

    with caplog.at_level(logging.INFO, logger="jobqueue"):
        started = loop.time()
        await run_components(components, signals, drain_delay=timedelta(milliseconds=200))

    assert loop.time() - started >= 0.2
    assert "draining: still serving http for 0.2s" in caplog.messages


async def test_without_components_of_a_phase_nothing_waits_for_it() -> None:
    events: list[str] = []
    components = [Recorded("pool", StopPhase.SIGNAL, events)]
    loop = asyncio.get_running_loop()

    started = loop.time()
    await run_components(components, signalled_soon(), drain_delay=timedelta(seconds=30))

    assert loop.time() - started < 5
    assert events == ["pool started", "pool stopped", "pool returned"]


async def test_a_component_ending_early_shuts_the_others_down_and_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events: list[str] = []
    components: list[Component] = [
        EndingEarly("lease recovery"),
        Recorded("pool", StopPhase.SIGNAL, events),
    ]

    with caplog.at_level(logging.ERROR, logger="jobqueue"):
        await run_components(components, Signals(), drain_delay=NO_DELAY)

    assert "lease recovery stopped unexpectedly; shutting down" in caplog.messages
    assert events == ["pool started", "pool stopped", "pool returned"]


async def test_a_startup_error_of_a_component_is_raised_as_it_is() -> None:
    error = StartupError("the HTTP server failed to start (see the log above)")
    events: list[str] = []
    components: list[Component] = [
        Recorded("pool", StopPhase.SIGNAL, events),
        EndingEarly("http", error),
    ]

    with pytest.raises(StartupError) as raised:
        await run_components(components, Signals(), drain_delay=NO_DELAY)

    assert raised.value is error
    assert events[-1] == "pool returned"


async def test_any_other_failure_of_a_component_is_a_startup_error_naming_it() -> None:
    components = [EndingEarly("retention", ValueError("boom"))]

    with pytest.raises(StartupError, match="a component failed: ValueError: boom"):
        await run_components(components, Signals(), drain_delay=NO_DELAY)


async def test_forcing_cancels_every_component_without_waiting_for_phases() -> None:
    events: list[str] = []
    components = [
        Recorded("pool", StopPhase.SIGNAL, events, linger=60),
        Recorded("metrics", StopPhase.LAST, events),
    ]
    runner = asyncio.create_task(run_components(components, signalled_soon(), drain_delay=NO_DELAY))
    await asyncio.sleep(0.1)  # signalled: the pool is draining, the listener waits

    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner

    assert "pool returned" not in events
    assert "metrics stopped" not in events


async def test_a_loop_and_an_action_are_components() -> None:
    events: list[str] = []
    drained: list[bool] = []
    components: list[Component] = [
        Loop("pool", StopPhase.SIGNAL, Recorded("inner", StopPhase.SIGNAL, events)),
        OnStop("readiness", StopPhase.SIGNAL, lambda: drained.append(True)),
    ]

    await run_components(components, signalled_soon(), drain_delay=NO_DELAY)

    assert events == ["inner started", "inner stopped", "inner returned"]
    assert drained == [True]


class Sends:
    def __init__(self) -> None:
        self.count = 0

    async def __call__(self) -> None:
        self.count += 1


async def announcing_with_one_owed() -> tuple[Announcing, asyncio.Task[None], Sends]:
    """A running notifier component that sent one wake-up and owes another."""
    sends = Sends()
    notifier = Notifier(sends, interval=timedelta(seconds=60))
    component = Announcing(notifier)
    task = asyncio.create_task(component.run())
    await asyncio.sleep(0)
    notifier.job_available()
    await asyncio.sleep(0.05)  # sent at once; the next one waits for the interval
    notifier.job_available()
    return component, task, sends


async def test_the_notifier_sends_what_it_owes_when_stopped() -> None:
    component, task, sends = await announcing_with_one_owed()

    component.stop()
    await task

    assert sends.count == 2


async def test_a_forced_notifier_sends_nothing_more() -> None:
    _, task, sends = await announcing_with_one_owed()

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert sends.count == 1
