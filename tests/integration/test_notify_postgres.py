"""Notifier and Listener against a real PostgreSQL: a wake-up crosses connections, a burst
costs a handful of NOTIFYs, and a listener whose connection is killed comes back."""

from __future__ import annotations

import asyncio
import itertools
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import timedelta

import asyncpg
import pytest
from sqlalchemy.ext.asyncio import create_async_engine

import jobqueue
from jobqueue.adapters.postgres.database import create_engine, normalize_url
from jobqueue.adapters.postgres.listener import (
    Connect,
    ListenConnection,
    Listener,
    asyncpg_connect,
)
from jobqueue.adapters.postgres.notify import CHANNEL, Notifier, pg_notify
from jobqueue.domain.job import NewJob
from tests.support.postgres import dsn, with_database

DEADLINE = 30.0
# How long 8 producers flood their pool: a send starved for a connection would leave
# most of it without a wake-up (the notifier's send timeout is 5 s).
FLOOD_SECONDS = 4.0


class WatchedConnection:
    """Passes everything through to a real connection and reports each LISTEN."""

    def __init__(self, inner: ListenConnection, listened: asyncio.Queue[None]) -> None:
        self._inner = inner
        self._listened = listened

    async def listen(self, channel: str, on_notify: Callable[[str], None]) -> None:
        await self._inner.listen(channel, on_notify)
        self._listened.put_nowait(None)

    async def until_lost(self) -> None:
        await self._inner.until_lost()

    async def close(self) -> None:
        await self._inner.close()


def watched(connect: Connect) -> tuple[Connect, asyncio.Queue[None]]:
    listened: asyncio.Queue[None] = asyncio.Queue()

    async def connect_watched() -> ListenConnection:
        return WatchedConnection(await connect(), listened)

    return connect_watched, listened


class Counter:
    def __init__(self) -> None:
        self.count = 0
        self.changed = asyncio.Event()

    def __call__(self, payload: str) -> None:
        self.count += 1
        self.changed.set()

    async def reaches(self, count: int) -> None:
        async with asyncio.timeout(DEADLINE):
            while self.count < count:
                self.changed.clear()
                await self.changed.wait()


async def until(condition: Callable[[], bool]) -> None:
    deadline = asyncio.get_running_loop().time() + DEADLINE
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


def ours(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == "jobqueue.notify"]


@pytest.fixture
async def raw(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(dsn(database_url))
    yield connection
    await connection.close()


async def test_a_listener_wakes_when_a_notifier_on_another_engine_signals(
    database_url: str,
) -> None:
    wakes = Counter()
    connect, listened = watched(asyncpg_connect(database_url))
    engine = create_engine(database_url, pool_size=1)
    try:
        async with Listener(connect, {CHANNEL: wakes}):
            await asyncio.wait_for(listened.get(), DEADLINE)
            assert wakes.count == 0
            async with Notifier(pg_notify(engine)) as notifier:
                notifier.job_available()

                await wakes.reaches(1)
    finally:
        await engine.dispose()


async def test_a_burst_of_a_thousand_job_available_calls_sends_a_handful_of_notifies(
    database_url: str, raw: asyncpg.Connection
) -> None:
    received: list[str] = []
    end = asyncio.Event()

    def count(_connection: object, _pid: int, _channel: str, payload: str) -> None:
        if payload == "end":
            end.set()
        else:
            received.append(payload)

    await raw.add_listener(CHANNEL, count)
    interval = timedelta(milliseconds=50)
    engine = create_engine(database_url, pool_size=2)
    loop = asyncio.get_running_loop()
    try:
        notifier = Notifier(pg_notify(engine), interval=interval)
        notifier.start()
        began = loop.time()
        for _ in range(1000):
            notifier.job_available()
            # Every call gets a chance to be sent on its own; coalescing must stop that.
            await asyncio.sleep(0)
        await notifier.aclose()
        elapsed = loop.time() - began
    finally:
        await engine.dispose()
    # Delivered after every earlier commit on the channel: the count is complete.
    await raw.execute(f"NOTIFY {CHANNEL}, 'end'")
    await asyncio.wait_for(end.wait(), DEADLINE)

    # One at once, at most one per interval after it, and the one aclose() owed.
    assert 1 <= len(received) <= 2 + elapsed / interval.total_seconds()
    assert len(received) < 1000
    assert set(received) == {""}


async def test_a_listener_whose_connection_is_killed_reconnects_and_calls_back_once(
    database_url: str, raw: asyncpg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="jobqueue.notify")
    name = f"jobqueue listener {uuid.uuid4().hex[:8]}"
    wakes = Counter()
    connect, listened = watched(asyncpg_connect(database_url, application_name=name))
    async with Listener(connect, {CHANNEL: wakes}):
        await asyncio.wait_for(listened.get(), DEADLINE)

        killed = await raw.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = $1",
            name,
        )
        assert killed == 1

        await asyncio.wait_for(listened.get(), DEADLINE)
        await wakes.reaches(1)
        await raw.execute(f"NOTIFY {CHANNEL}")
        await wakes.reaches(2)
    assert any("was lost" in record.getMessage() for record in ours(caplog))


async def test_a_listener_on_an_unreachable_database_keeps_retrying_and_never_calls_back(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="jobqueue.notify")
    missing = with_database(database_url, f"jq_missing_{uuid.uuid4().hex[:8]}")
    wakes = Counter()
    listener = Listener(asyncpg_connect(missing), {CHANNEL: wakes})
    listener.start()
    try:
        await until(lambda: sum("could not connect" in r.getMessage() for r in ours(caplog)) >= 2)
    finally:
        await listener.aclose()

    assert wakes.count == 0


async def test_a_notifier_whose_database_fails_logs_and_never_raises(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="jobqueue.notify")
    engine = create_engine(with_database(database_url, f"jq_missing_{uuid.uuid4().hex[:8]}"))
    try:
        async with Notifier(pg_notify(engine)) as notifier:
            notifier.job_available()
            await until(lambda: bool(ours(caplog)))
    finally:
        await engine.dispose()

    [warning] = ours(caplog)
    assert "could not send a wake-up notification" in warning.getMessage()
    assert "does not exist" in getattr(warning, "error", "")


async def test_producers_holding_every_connection_of_their_pool_still_announce_their_jobs(
    database_url: str, raw: asyncpg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    """`enqueue(engine)` from 8 tasks on a pool of 8 without overflow, as a user's own
    engine may be: the notifier's send would wait behind them for a connection (no
    wake-up at all for up to its 5 s timeout, then a warning, seen in the peer bench);
    their own inserts carry the wake-ups instead."""
    caplog.set_level(logging.WARNING, logger="jobqueue.notify")
    heard: list[float] = []
    loop = asyncio.get_running_loop()
    await raw.add_listener(CHANNEL, lambda *_: heard.append(loop.time()))
    engine = create_async_engine(normalize_url(database_url), pool_size=8, max_overflow=0)
    new = NewJob.build(type="flood", default_max_attempts=3)
    enqueued = 0
    began = loop.time()
    stop_at = began + FLOOD_SECONDS

    async def produce() -> None:
        nonlocal enqueued
        while loop.time() < stop_at:
            await jobqueue.enqueue(engine, new)
            enqueued += 1

    try:
        await asyncio.gather(*(produce() for _ in range(8)))
    finally:
        await engine.dispose()
    await raw.execute(f"NOTIFY {CHANNEL}")  # delivered after every earlier one
    await until(lambda: bool(heard) and heard[-1] >= stop_at)

    moments = [began, *(each for each in heard if each < stop_at), stop_at]
    longest = max(later - earlier for earlier, later in itertools.pairwise(moments))
    assert enqueued > 100
    assert longest < FLOOD_SECONDS / 2, f"no wake-up for {longest:.2f}s of {FLOOD_SECONDS}s"
    assert ours(caplog) == []
