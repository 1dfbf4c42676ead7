"""Waiting for a job's end, woken by the database: `EndingWatch`.

A waiter marks the job watched (`JobStore.watch`), then reads it: ended already, it has
its answer; otherwise it waits for the notification the write that ends the job sends
(migration 0023's triggers, on `ENDINGS_CHANNEL`, with the job's id), and reads it
again. The mark is written on the live row, so an ending written after it sees it and
one written before leaves a finished job to read: no end falls between the two. One
LISTEN connection serves every waiter of a process (`Listener`); a notification wakes
the waiters of its job only.

Notifications are how a waiter learns of the end, not what it trusts: it always reads
the job again. While nothing listens (the connection lost, NOTIFY=false, PgBouncer)
waiters read their job every `recheck` instead, and when the listener comes back every
waiter reads its job once, since an end may have been announced to nobody.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from datetime import timedelta
from uuid import UUID

from jobqueue.adapters.postgres.notify import MISSED
from jobqueue.domain.job import Job
from jobqueue.domain.ports import JobStore
from jobqueue.domain.status import LIVE

_log = logging.getLogger("jobqueue.waits")

# The longest one wait may be asked for: a long poll's, which proxies and clients cut
# off after a minute or so; a client waiting longer asks again.
MAX_WAIT = timedelta(seconds=60)


class EndingWatch:
    """Waits for jobs' ends in this process. `heard` and `listening` are the `Listener`'s
    callbacks for `ENDINGS_CHANNEL`; without a listener, waiters read their job every
    `recheck`."""

    def __init__(self, store: JobStore, *, recheck: timedelta) -> None:
        if recheck <= timedelta(0):
            raise ValueError("the recheck interval must be positive")
        self._store = store
        self._recheck = recheck.total_seconds()
        self._waiters: defaultdict[UUID, set[asyncio.Event]] = defaultdict(set)
        self._listening = False
        self._closed = False

    @property
    def waiting(self) -> int:
        """How many waits are in progress."""
        return sum(len(events) for events in self._waiters.values())

    def heard(self, payload: str) -> None:
        """A notification on the channel: the id of a watched job that ended, or `MISSED`
        (anything may have ended meanwhile)."""
        if payload == MISSED:
            self._wake_all()
            return
        try:
            job_id = UUID(payload)
        except ValueError:
            _log.warning("ignored a notification of an ending that names no job: %r", payload)
            return
        for event in self._waiters.get(job_id, ()):
            event.set()

    def listening(self, listening: bool) -> None:
        """The listener started (True) or stopped (False) hearing the channel."""
        self._listening = listening
        if listening:
            self._wake_all()

    def close(self) -> None:
        """The process is stopping: every wait returns the job as it is now, and the
        waits begun from now on do too (a client asks another replica)."""
        self._closed = True
        self._wake_all()

    async def wait(self, job_id: UUID, within: timedelta) -> Job:
        """The job once it has ended (finished, or held as a dead letter), or as it is when
        `within` (at most `MAX_WAIT`) passed first, or when the process stops. Raises
        `JobNotFound` for a job that does not exist, or was deleted meanwhile."""
        if not timedelta(0) <= within <= MAX_WAIT:
            raise ValueError(f"a wait lasts from 0 to {MAX_WAIT}, got {within}")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within.total_seconds()
        woken = asyncio.Event()
        self._waiters[job_id].add(woken)
        try:
            # Registered first, so that an end announced from here on wakes this wait.
            await self._store.watch(job_id)
            while True:
                woken.clear()
                job = await self._store.get(job_id)
                left = deadline - loop.time()
                if job.status not in LIVE or left <= 0 or self._closed:
                    return job
                bound = left if self._listening else min(left, self._recheck)
                try:
                    async with asyncio.timeout(bound):
                        await woken.wait()
                except TimeoutError:
                    pass
        finally:
            events = self._waiters[job_id]
            events.discard(woken)
            if not events:
                del self._waiters[job_id]

    def _wake_all(self) -> None:
        for events in self._waiters.values():
            for event in events:
                event.set()
