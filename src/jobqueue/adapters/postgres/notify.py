"""Wake-ups across processes over LISTEN/NOTIFY, coalesced so they cost the queue nothing.

A worker pool waits up to POLL_INTERVAL between claims when nothing is due; a
submission in another process should end that wait at once. The submitting side
(`Notifier`) marks "something new" with a call that does no I/O, and a background task
sends at most one `pg_notify` per short interval on a pooled connection of its own.
A NOTIFY inside each enqueue transaction would make PostgreSQL serialise those commits
(measured: ~18,400 inserts/s plain, ~4,750/s with a NOTIFY per insert), so wake-ups are
never sent per job nor inside a job's transaction.

The working side (`Listener`) holds one dedicated connection, outside the engine's pool,
doing `LISTEN` and calling back (the pool's `wake`) on each notification. Both are an
optimisation of latency only: a lost notification, a dead listener or `NOTIFY=false`
leave workers polling, so a job is claimed by the next poll at the latest.

Only jobs due now are announced: a submission and an operator's retry. A retry after a
failure is due later, at its backoff time, and nobody is told: the next poll after its
due time claims it, so POLL_INTERVAL bounds how late it starts.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from functools import partial
from types import TracebackType
from typing import Any, Protocol, Self

import asyncpg
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.database import driver_arguments
from jobqueue.adapters.postgres.driver import fetch_pooled
from jobqueue.adapters.postgres.failures import reason
from jobqueue.adapters.postgres.statement import Statement
from jobqueue.adapters.telemetry.logging import Outage
from jobqueue.domain.backoff import Backoff

# The only channel; never built from anything a client sent.
CHANNEL = "jobqueue_jobs"
# The payload a callback is given after the listener was deaf for a while: whatever was
# announced meanwhile is unknown.
MISSED = ""

_log = logging.getLogger("jobqueue.notify")

Send = Callable[[], Awaitable[None]]
Sleep = Callable[[float], Awaitable[None]]

# Short enough that a job submitted right after another waits at most this long for its
# wake-up (pickup latency is measured in milliseconds); long enough that a burst of
# submissions costs at most 500 NOTIFY transactions a second, not one per job.
DEFAULT_NOTIFY_INTERVAL = timedelta(milliseconds=2)
_SEND_TIMEOUT = timedelta(seconds=5)
_RECONNECT_BACKOFF = Backoff(timedelta(milliseconds=250), timedelta(seconds=10))
_CONNECT_TIMEOUT = timedelta(seconds=10)
# A half-open TCP connection never reports itself lost; a periodic query finds it.
_CHECK_EVERY = timedelta(seconds=15)
_CHECK_TIMEOUT = timedelta(seconds=5)


# --- the submitting side -------------------------------------------------------------------


# Sent by the driver, like the worker's hot-path statements: an API under load sends
# up to one a `DEFAULT_NOTIFY_INTERVAL`, and through SQLAlchemy's execution layers each
# cost about ten times an insert sent on the driver (profiled: a fifth of the API's CPU at
# ~1,500 submissions/s).
_NOTIFY = Statement("notify_jobs", f"SELECT pg_notify('{CHANNEL}', '')")


def pg_notify(engine: AsyncEngine) -> Send:
    """A `Send` that issues one `pg_notify` on a connection of `engine`'s pool, in a
    transaction of its own (autocommit), never inside a job's: on the driver, like the
    other statements sent many times a second (`driver.fetch_pooled`)."""

    async def send() -> None:
        await fetch_pooled(engine, _NOTIFY, {})

    return send


class _Background:
    """Work on a task of its own: started once, stopped by `aclose`, and usable as
    `async with`, which does both."""

    _task_name: str

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is not None:
            raise RuntimeError(f"a {type(self).__name__} is started once")
        self._task = asyncio.create_task(self._run(), name=f"jobqueue {self._task_name}")

    async def aclose(self) -> None:
        await self._cancel()

    async def _cancel(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


class Notifier(_Background):
    """Coalesces "a job is available" into at most one `send` per `interval`.

    The first call after a quiet spell is sent at once; calls made while a send is in
    flight or during the interval after it become one more send when the interval ends.
    Failures are logged, never raised: the caller is a request that already succeeded.

    The task sending them runs only while something is owed: it ends after the interval
    that follows its last send, and the next call starts another. So a notifier left
    behind (a producer dropping its engine) leaves no task pending.
    """

    def __init__(
        self,
        send: Send,
        *,
        interval: timedelta = DEFAULT_NOTIFY_INTERVAL,
        send_timeout: timedelta = _SEND_TIMEOUT,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if interval <= timedelta(0):
            raise ValueError("the notify interval must be positive")
        if send_timeout <= timedelta(0):
            raise ValueError("the send timeout must be positive")
        super().__init__()
        self._send = send
        self._interval = interval.total_seconds()
        self._send_timeout = send_timeout.total_seconds()
        self._sleep = sleep
        self._wanted = asyncio.Event()
        self._started = False
        self._closed = False
        self._outage = Outage(
            _log,
            "could not send a wake-up notification; workers in other processes "
            "will find new jobs at their next poll",
            ended="wake-up notifications are sent again",
        )

    def job_available(self) -> None:
        """Note that a job became due; returns at once, sends nothing itself."""
        if self._closed:
            return
        self._wanted.set()
        if self._started:
            self._send_owed()

    def carry(self) -> bool:
        """Offer the caller to carry the next wake-up in its own statement; True if taken.

        Taken when the notifier is quiet (nothing sent within the interval, nothing in
        flight or owed): the caller's statement then notifies at its commit, with no
        round trip of its own and none of this notifier's, and that counts as this
        notifier's send, so calls during the interval after it are coalesced into one
        send at its end, as after any send. Refused otherwise: the caller then calls
        `job_available`. A statement that fails after taking it owes nothing, since it
        enqueued nothing.
        """
        if self._closed or not self._started or self._wanted.is_set():
            return False
        if self._task is not None and not self._task.done():
            return False
        self._task = asyncio.create_task(self._after_carried(), name=f"jobqueue {self._task_name}")
        return True

    _task_name = "notifier"

    def start(self) -> None:
        if self._closed or self._started:
            raise RuntimeError("a Notifier is started once")
        self._started = True
        if self._wanted.is_set():
            self._send_owed()

    def _send_owed(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name=f"jobqueue {self._task_name}")

    async def aclose(self, *, flush: bool = True) -> None:
        """Stop. With `flush`, a wake-up still owed is sent first (bounded by the send
        timeout), so the last submissions before a shutdown are announced too."""
        self._closed = True
        await self._cancel()
        if self._started and flush and self._wanted.is_set():
            self._wanted.clear()
            await self._send_logged()

    async def _run(self) -> None:
        while self._wanted.is_set():
            self._wanted.clear()
            try:
                await self._send_logged()
            except asyncio.CancelledError:
                # Cut short by aclose(): it sends what is still owed.
                self._wanted.set()
                raise
            await self._sleep(self._interval)

    async def _after_carried(self) -> None:
        # The caller's statement was this interval's send.
        await self._sleep(self._interval)
        await self._run()

    async def _send_logged(self) -> None:
        try:
            async with asyncio.timeout(self._send_timeout):
                await self._send()
        except Exception as error:
            self._outage.failed(reason(error))
            return
        self._outage.ok()


# --- the working side ---------------------------------------------------------------------


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


class Listener(_Background):
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
