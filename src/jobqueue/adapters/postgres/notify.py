"""Wake-ups across processes over LISTEN/NOTIFY, coalesced so they cost the queue nothing.

A worker pool waits up to POLL_INTERVAL between claims when nothing is due; a
submission in another process should end that wait at once. The submitting side
(`Notifier`) marks "something new" with a call that does no I/O, and a background task
sends at most one `pg_notify` per short interval on a pooled connection of its own.
A NOTIFY inside each enqueue transaction would make PostgreSQL serialise those commits
(measured: ~18,400 inserts/s plain, ~4,750/s with a NOTIFY per insert), so wake-ups are
never sent per job nor inside a job's transaction.

The working side (`listener.Listener`) holds one dedicated connection, outside the
engine's pool, doing `LISTEN` and calling back (the pool's `wake`) on each notification.
Both are an optimisation of latency only: a lost notification, a dead listener or
`NOTIFY=false` leave workers polling, so a job is claimed by the next poll at the
latest.

Only jobs due now are announced: a submission and an operator's retry. A retry after a
failure is due later, at its backoff time, and nobody is told: the next poll after its
due time claims it, so POLL_INTERVAL bounds how late it starts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from types import TracebackType
from typing import Self

from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.driver import fetch_pooled
from jobqueue.adapters.postgres.failures import reason
from jobqueue.adapters.postgres.statement import Statement
from jobqueue.adapters.telemetry.logging import Outage

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


class Background:
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


class Notifier(Background):
    """Coalesces "a job is available" into at most one `send` per `interval`.

    The first call after a quiet spell is sent at once; calls made while a send is in
    flight or during the interval after it become one more send when the interval ends.
    Failures are logged, never raised: the caller is a request that already succeeded.

    The task sending them runs only while something is owed: it ends after the interval
    that follows its last send, and the next call starts another. So a notifier left
    behind (a producer dropping its engine) leaves no task pending.

    Its sends take a connection from the callers' own pool, which callers enqueueing
    flat out keep busy: a send could then wait for one past its timeout, the wake-up
    late and a warning logged for nothing (seen with 8 producers on a pool of 8). So
    while a send waits, the next caller's statement may carry that wake-up instead
    (`carry`, then `carried` once committed), and the send is dropped.
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
        # While a send of this notifier's own is on its way: whether a caller took it
        # over (`carry`), and whether that caller's statement committed (`carried`).
        self._sending = False
        self._taken_over = False
        self._relieved = asyncio.Event()
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

        Taken too by the first caller while the notifier's own send is on its way: that
        send is dropped once the caller says its statement committed (`carried`), and
        goes on if it never does.
        """
        if self._closed or not self._started:
            return False
        if self._sending:
            taken, self._taken_over = not self._taken_over, True
            return taken
        if self._wanted.is_set():
            return False
        if self._task is not None and not self._task.done():
            return False
        self._task = asyncio.create_task(self._after_carried(), name=f"jobqueue {self._task_name}")
        return True

    def carried(self) -> None:
        """The statement that took the wake-up (`carry`) committed: it was sent."""
        if self._taken_over:
            self._relieved.set()

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
        self._sending, self._taken_over = True, False
        self._relieved.clear()
        sending = asyncio.ensure_future(self._send())
        relieved = asyncio.ensure_future(self._relieved.wait())
        try:
            async with asyncio.timeout(self._send_timeout):
                await asyncio.wait((sending, relieved), return_when=asyncio.FIRST_COMPLETED)
            # Done, or a caller's statement carried it and the connection is not needed.
            if sending.done():
                sending.result()
        except Exception as error:
            self._outage.failed(reason(error))
            return
        finally:
            # A caller that took it over and commits later has nothing left to relieve.
            self._sending = self._taken_over = False
            for each in (sending, relieved):
                each.cancel()
            await asyncio.gather(sending, relieved, return_exceptions=True)
        self._outage.ok()
