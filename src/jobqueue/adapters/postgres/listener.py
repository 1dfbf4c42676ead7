"""The working side of wake-ups (`notify` has the submitting side): a `Listener` holds one
dedicated connection, outside the engine's pool, doing `LISTEN` and calling back (a
pool's `wake`, an ending watch) on each notification, reconnecting when it is lost."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from functools import partial
from typing import Any, Protocol

import asyncpg

from jobqueue.adapters.postgres.database import driver_arguments
from jobqueue.adapters.postgres.failures import reason
from jobqueue.adapters.postgres.notify import MISSED, Background, Sleep
from jobqueue.domain.backoff import Backoff

_log = logging.getLogger("jobqueue.notify")

_RECONNECT_BACKOFF = Backoff(timedelta(milliseconds=250), timedelta(seconds=10))
_CONNECT_TIMEOUT = timedelta(seconds=10)
# A half-open TCP connection never reports itself lost; a periodic query finds it.
_CHECK_EVERY = timedelta(seconds=15)
_CHECK_TIMEOUT = timedelta(seconds=5)


class ListenConnection(Protocol):
    """A connection dedicated to receiving notifications."""

    async def listen(self, channel: str, on_notify: Callable[[str], None]) -> None:
        """Subscribe: `on_notify` is called with the payload of every notification on
        `channel`."""

    async def until_lost(self) -> None:
        """Return, or raise, once the connection can no longer deliver notifications."""

    async def close(self) -> None:
        """Release the connection; must not raise."""


Connect = Callable[[], Awaitable[ListenConnection]]


class Listener(Background):
    """Calls `on_notify[channel]` with the payload of every notification on each of its
    channels, from a connection it keeps open.

    A connection that cannot be opened or is lost is retried with capped, jittered
    backoff. After a LISTEN that follows a refusal or a loss, every callback is called
    once more, with an empty payload (`MISSED`): something may have been announced while
    nobody was listening. `on_listening` is told each time it starts (True, once every
    channel is listened to) and stops (False) hearing them.
    """

    def __init__(
        self,
        connect: Connect,
        on_notify: Mapping[str, Callable[[str], None]],
        *,
        backoff: Backoff = _RECONNECT_BACKOFF,
        sleep: Sleep = asyncio.sleep,
        rand: Callable[[], float] = random.random,
        on_listening: Callable[[bool], None] = lambda _listening: None,
    ) -> None:
        super().__init__()
        self._connect = connect
        self._on_notify = on_notify
        self._on_listening = on_listening
        self._backoff = backoff
        self._sleep = sleep
        self._rand = rand

    _task_name = "listener"

    async def _run(self) -> None:
        failures = 0
        deaf = False  # since the first attempt; nothing could have been missed before it
        while True:
            if failures:
                delay = self._backoff.delay(failures, self._rand).total_seconds()
                await self._sleep(delay)
            try:
                connection = await self._connect()
            except Exception as error:
                failures += 1
                deaf = True
                self._report("could not connect to listen for new jobs", error, failures)
                continue
            try:
                for channel, callback in self._on_notify.items():
                    await connection.listen(channel, partial(self._notified, callback))
                _log.info("listening for new jobs", extra={"channels": list(self._on_notify)})
                if deaf:
                    for callback in self._on_notify.values():
                        self._notified(callback, MISSED)
                failures, deaf = 0, False
                self._on_listening(True)
                await connection.until_lost()
                _log.warning("the connection listening for new jobs was lost; reconnecting")
            except Exception as error:
                self._report("listening for new jobs failed", error, failures + 1)
            finally:
                self._on_listening(False)
                await connection.close()
            failures += 1
            deaf = True

    def _notified(self, callback: Callable[[str], None], payload: str) -> None:
        try:
            callback(payload)
        except Exception:
            _log.exception("a notification callback failed")

    def _report(self, message: str, error: Exception, failures: int) -> None:
        _log.warning(
            "%s; workers poll meanwhile, retrying in at most %gs",
            message,
            self._backoff.ceiling(failures).total_seconds(),
            extra={"error": reason(error), "failures": failures},
        )


# --- asyncpg ------------------------------------------------------------------------------


def asyncpg_connect(
    url: str,
    *,
    application_name: str = "jobqueue listener",
    connect_timeout: timedelta = _CONNECT_TIMEOUT,
    check_every: timedelta = _CHECK_EVERY,
    check_timeout: timedelta = _CHECK_TIMEOUT,
) -> Connect:
    """A `Connect` opening a plain asyncpg connection to `url`, outside any pool (a
    pooled connection would be handed to someone else, and its LISTEN with it)."""
    arguments = {"timeout": connect_timeout.total_seconds(), **driver_arguments(url)}
    arguments["server_settings"] = {
        **arguments.get("server_settings", {}),
        "application_name": application_name,
    }

    async def connect() -> ListenConnection:
        connection = await asyncpg.connect(**arguments)
        return _AsyncpgListenConnection(
            connection, check_every.total_seconds(), check_timeout.total_seconds()
        )

    return connect


class _AsyncpgListenConnection:
    def __init__(self, connection: Any, check_every: float, check_timeout: float) -> None:
        self._connection = connection
        self._check_every = check_every
        self._check_timeout = check_timeout
        self._lost = asyncio.Event()
        connection.add_termination_listener(lambda _connection: self._lost.set())

    async def listen(self, channel: str, on_notify: Callable[[str], None]) -> None:
        def callback(_connection: Any, _pid: int, _channel: str, payload: str) -> None:
            on_notify(payload)

        await self._connection.add_listener(channel, callback)

    async def until_lost(self) -> None:
        while not self._lost.is_set() and not self._connection.is_closed():
            try:
                async with asyncio.timeout(self._check_every):
                    await self._lost.wait()
            except TimeoutError:
                async with asyncio.timeout(self._check_timeout):
                    await self._connection.execute("SELECT 1")

    async def close(self) -> None:
        if self._connection.is_closed():
            return
        try:
            async with asyncio.timeout(self._check_timeout):
                await self._connection.close()
        except Exception:
            # A connection that cannot say goodbye is dropped instead.
            self._connection.terminate()
