"""The Listener: calls back on notifications, and keeps its connection alive through
refusals and losses with capped backoff, calling back once after each reconnect."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import timedelta

import pytest

from jobqueue.adapters.postgres.database import driver_arguments
from jobqueue.adapters.postgres.listener import Listener
from jobqueue.adapters.postgres.notify import CHANNEL, MISSED
from jobqueue.domain.backoff import Backoff
from tests.unit.pool_harness import eventually

BACKOFF = Backoff(timedelta(seconds=1), timedelta(seconds=4))


def ceiling_of_the_jitter() -> float:
    return 1.0


class FakeConnection:
    def __init__(self, listen_error: Exception | None = None) -> None:
        self.closed = False
        # Channel to callback, in the order LISTENed to.
        self.callbacks: dict[str, Callable[[str], None]] = {}
        self._lost = asyncio.Event()
        self._listen_error = listen_error

    async def listen(self, channel: str, on_notify: Callable[[str], None]) -> None:
        if self._listen_error is not None:
            raise self._listen_error
        self.callbacks[channel] = on_notify

    async def until_lost(self) -> None:
        await self._lost.wait()

    async def close(self) -> None:
        self.closed = True

    @property
    def listening(self) -> bool:
        return bool(self.callbacks) and not self.closed

    def notify(self, channel: str = CHANNEL, payload: str = "") -> None:
        self.callbacks[channel](payload)

    def lose(self) -> None:
        self._lost.set()


class FakeServer:
    """The injected connect function: refuses `refusals` times, then hands out
    connections (failing their LISTEN while `listen_errors` last)."""

    def __init__(self, refusals: int = 0, listen_errors: int = 0) -> None:
        self.refusals = refusals
        self.listen_errors = listen_errors
        self.connections: list[FakeConnection] = []

    async def __call__(self) -> FakeConnection:
        if self.refusals:
            self.refusals -= 1
            raise OSError("connection refused")
        error = None
        if self.listen_errors:
            self.listen_errors -= 1
            error = RuntimeError("LISTEN refused")
        connection = FakeConnection(error)
        self.connections.append(connection)
        return connection

    @property
    def latest(self) -> FakeConnection:
        return self.connections[-1]


class RecordingSleep:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await asyncio.sleep(0)


class Wakes:
    def __init__(self) -> None:
        self.count = 0
        self.payloads: list[str] = []

    def __call__(self, payload: str) -> None:
        self.count += 1
        self.payloads.append(payload)


def listener_for(
    server: FakeServer, wakes: Callable[[str], None], sleep: RecordingSleep
) -> Listener:
    return Listener(
        server, {CHANNEL: wakes}, backoff=BACKOFF, sleep=sleep, rand=ceiling_of_the_jitter
    )


async def test_each_channel_calls_its_own_callback_and_all_are_called_after_a_reconnect() -> None:
    server, sleep = FakeServer(), RecordingSleep()
    jobs, pauses = Wakes(), Wakes()
    listener = Listener(
        server,
        {CHANNEL: jobs, "other": pauses},
        backoff=BACKOFF,
        sleep=sleep,
        rand=ceiling_of_the_jitter,
    )
    async with listener:
        await eventually(lambda: bool(server.connections) and server.latest.listening, "LISTEN")
        assert list(server.latest.callbacks) == [CHANNEL, "other"]
        server.latest.notify("other", "a")
        server.latest.notify("other", "b")
        server.latest.notify(CHANNEL)
        assert (jobs.count, pauses.count) == (1, 2)
        # Each callback is given its notification's payload.
        assert pauses.payloads == ["a", "b"]

        server.latest.lose()
        await eventually(lambda: len(server.connections) == 2 and server.latest.listening, "again")
        # Deaf for a while: each channel's callback once, for what may have been missed,
        # with the empty payload that says so.
        assert (jobs.count, pauses.count) == (2, 3)
        assert pauses.payloads[-1] == MISSED


async def test_each_notification_calls_back_and_the_first_listen_does_not() -> None:
    server, wakes, sleep = FakeServer(), Wakes(), RecordingSleep()
    async with listener_for(server, wakes, sleep):
        await eventually(lambda: bool(server.connections) and server.latest.listening, "LISTEN")
        assert list(server.latest.callbacks) == [CHANNEL]
        assert wakes.count == 0

        for _ in range(3):
            server.latest.notify()

        assert wakes.count == 3
    assert sleep.delays == []


async def test_refused_connections_are_retried_with_growing_capped_backoff_then_call_back_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="jobqueue.notify")
    server, wakes, sleep = FakeServer(refusals=5), Wakes(), RecordingSleep()
    async with listener_for(server, wakes, sleep):
        await eventually(lambda: bool(server.connections) and server.latest.listening, "LISTEN")
        # Jobs announced while nobody listened are looked for once.
        await eventually(lambda: wakes.count == 1, "the call after reconnecting")

        assert sleep.delays == [1.0, 2.0, 4.0, 4.0, 4.0]
        assert len(server.connections) == 1
        server.latest.notify()
        assert wakes.count == 2
    refusals = [r for r in caplog.records if "could not connect" in r.getMessage()]
    assert len(refusals) == 5
    assert getattr(refusals[0], "error", "") == "OSError: connection refused"


async def test_a_lost_connection_is_closed_and_replaced_and_calls_back_once() -> None:
    server, wakes, sleep = FakeServer(), Wakes(), RecordingSleep()
    async with listener_for(server, wakes, sleep):
        await eventually(lambda: bool(server.connections) and server.latest.listening, "LISTEN")
        first = server.latest

        first.lose()

        await eventually(lambda: len(server.connections) == 2, "a new connection")
        await eventually(lambda: server.latest.listening, "LISTEN again")
        assert first.closed
        assert wakes.count == 1
        assert sleep.delays == [1.0]
        server.latest.notify()
        assert wakes.count == 2


async def test_the_backoff_starts_over_after_a_successful_listen() -> None:
    server, wakes, sleep = FakeServer(refusals=3), Wakes(), RecordingSleep()
    async with listener_for(server, wakes, sleep):
        await eventually(lambda: bool(server.connections) and server.latest.listening, "LISTEN")
        server.refusals = 1

        server.latest.lose()

        await eventually(lambda: len(server.connections) == 2, "a new connection")
        await eventually(lambda: server.latest.listening, "LISTEN again")
        assert sleep.delays == [1.0, 2.0, 4.0, 1.0, 2.0]
        assert wakes.count == 2


async def test_a_refused_listen_closes_that_connection_and_is_retried() -> None:
    server, wakes, sleep = FakeServer(listen_errors=2), Wakes(), RecordingSleep()
    async with listener_for(server, wakes, sleep):
        await eventually(lambda: len(server.connections) == 3, "a third connection")
        await eventually(lambda: server.latest.listening, "LISTEN")

        assert [c.closed for c in server.connections] == [True, True, False]
        assert sleep.delays == [1.0, 2.0]
        assert wakes.count == 1


async def test_a_failing_callback_is_logged_and_listening_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="jobqueue.notify")
    calls: list[int] = []

    def broken(payload: str) -> None:
        calls.append(1)
        raise RuntimeError("boom")

    server, sleep = FakeServer(), RecordingSleep()
    async with listener_for(server, broken, sleep):
        await eventually(lambda: bool(server.connections) and server.latest.listening, "LISTEN")

        server.latest.notify()
        server.latest.notify()

        assert len(calls) == 2
        assert server.latest.listening
    assert len(server.connections) == 1
    assert any(r.getMessage() == "a notification callback failed" for r in caplog.records)


async def test_aclose_closes_the_connection_and_opens_no_other() -> None:
    server, wakes, sleep = FakeServer(), Wakes(), RecordingSleep()
    listener = listener_for(server, wakes, sleep)
    listener.start()
    await eventually(lambda: bool(server.connections) and server.latest.listening, "LISTEN")

    await listener.aclose()

    assert server.latest.closed
    await asyncio.sleep(0)
    assert len(server.connections) == 1


async def test_aclose_while_the_server_refuses_returns() -> None:
    server, wakes, sleep = FakeServer(refusals=10**9), Wakes(), RecordingSleep()
    listener = listener_for(server, wakes, sleep)
    listener.start()
    await eventually(lambda: len(sleep.delays) >= 3, "a few refusals")

    await asyncio.wait_for(listener.aclose(), 20)

    assert server.connections == []
    assert wakes.count == 0


# --- how the listener's own connection is made ----------------------------------------


def test_driver_arguments_reach_an_embedded_server_through_its_socket_directory() -> None:
    arguments = driver_arguments("postgresql+asyncpg://postgres@/jobs?host=/tmp/pg%20sock")

    assert arguments == {"user": "postgres", "database": "jobs", "host": "/tmp/pg sock"}


def test_driver_arguments_keep_driver_options_and_decode_credentials() -> None:
    arguments = driver_arguments(
        "postgres://app%40corp:p%40ss%2Fw:rd@db.internal:6543/jobs?ssl=require"
        "&prepared_statement_cache_size=0"
    )

    assert arguments == {
        "user": "app@corp",
        "password": "p@ss/w:rd",
        "host": "db.internal",
        "port": 6543,
        "database": "jobs",
        "ssl": "require",
    }
