"""An in-process producer's waits for jobs' ends (`jobqueue.wait`): an `EndingWatch` per
engine and event loop, with a listening connection of its own, opened by the first
wait and closed once no wait has been in progress for a while."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from uuid import UUID
from weakref import WeakKeyDictionary

from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import Pool

from jobqueue.adapters.postgres.endings import EndingWatch
from jobqueue.adapters.postgres.listener import Listener, asyncpg_connect
from jobqueue.adapters.postgres.queries.jobs import ENDINGS_CHANNEL
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.job import Job


class EngineWaits:
    """The waits of an in-process producer on `engine` (`jobqueue.wait`): an
    `EndingWatch` and its own listening connection, opened by the first wait and closed
    once no wait has been in progress for `linger`. Without `listen` (PgBouncer, or
    NOTIFY=false) no connection is opened: waits read their job every `recheck`."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        listen: bool = True,
        recheck: timedelta = timedelta(seconds=1),
        linger: timedelta = timedelta(seconds=30),
    ) -> None:
        self._listen = listen
        self._url = engine.url.render_as_string(hide_password=False)
        self._watch = EndingWatch(PostgresJobStore(engine), recheck=recheck)
        self._linger = linger.total_seconds()
        self._listener: Listener | None = None
        self._idle: asyncio.TimerHandle | None = None
        # A listener being closed: kept, so that its task is not collected mid-way.
        self._closing: asyncio.Task[None] | None = None

    async def wait(self, job_id: UUID, within: timedelta) -> Job:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        if self._listener is None and self._listen:
            self._listener = Listener(
                asyncpg_connect(self._url, application_name="jobqueue waits"),
                {ENDINGS_CHANNEL: self._watch.heard},
                on_listening=self._watch.listening,
            )
            self._listener.start()
        try:
            return await self._watch.wait(job_id, within)
        finally:
            if not self._watch.waiting:
                self._idle = asyncio.get_running_loop().call_later(self._linger, self._close)

    def _close(self) -> None:
        listener, self._listener, self._idle = self._listener, None, None
        if listener is not None:
            self._closing = asyncio.create_task(listener.aclose(), name="jobqueue waits closing")


# One per engine and event loop, made on first use, as enqueue's notifiers are.
_WAITS: WeakKeyDictionary[Pool, dict[asyncio.AbstractEventLoop, EngineWaits]] = WeakKeyDictionary()


def waits_of(engine: AsyncEngine, *, listen: bool) -> EngineWaits:
    loop = asyncio.get_running_loop()
    by_loop = _WAITS.setdefault(engine.sync_engine.pool, {})
    waits = by_loop.get(loop)
    if waits is None:
        for stale in [each for each in by_loop if each.is_closed()]:
            del by_loop[stale]
        waits = by_loop[loop] = EngineWaits(engine, listen=listen)
    return waits
