"""When a pool claims: the dispatcher's loop.

It sends a claim whenever the pool wants jobs (`ClaimSizing.wanted`), one at a time, or a
second beside the first under a backlog; it rests after a claim that came back short
until the poll interval passes or a wake-up arrives (nothing more due), or also one of
the pool's own jobs ends (a limit on running jobs held it back: that job's slot is
free), until the rate's window opens (the queue's rate held it back; a key's or a
type's: that, or a wake-up), and after a claim that failed for the poll interval. Each
claim is a task of its own; the loop wakes on one event (`nudge`: a worker freed, a
write settled, a claim back, a wake-up, a stop) rather than waiting on several. A claim
carries the endings waiting to be written (`OutcomeWriter.claim`), and between claims the
writer is flushed, so no ending waits past the loop's next turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from jobqueue.adapters.telemetry.logging import log_failure
from jobqueue.domain.flow import Claimed, Limit
from jobqueue.domain.job import Job
from jobqueue.entrypoints.worker.claim_sizing import ClaimSizing
from jobqueue.entrypoints.worker.outcomes import OutcomeWriter

_log = logging.getLogger("jobqueue.worker")

# A job claimed ahead of need that no worker has taken after this long (the running jobs
# turned out longer than the prefetch expected) is given back for another process to run.
PREFETCH_HOLD_SECONDS = 1.0

# The limits whose slots are running jobs: one of the pool's own jobs ending frees one.
_SLOTS = frozenset({Limit.CONCURRENCY, Limit.KEY_CONCURRENCY})


@dataclass(frozen=True, slots=True)
class Rest:
    """No claim is sent until `until` (time.monotonic()), unless a wake-up arrives first
    (`on_wake`: work was enqueued) or one of the pool's own jobs ends (`on_ending`: the
    claim was held back by a limit on running jobs, and that job's slot is free once its
    ending is written, which the next claim carries)."""

    until: float
    on_wake: bool = False
    on_ending: bool = False


class Claiming(Protocol):
    """What the dispatcher asks of its pool (`WorkerPool`)."""

    def may_claim(self) -> bool:
        """Whether claims may go out now (not paused, with types to claim)."""
        ...

    def wanted(self, requested: int) -> int:
        """How many jobs to claim, the claims on their way having `requested` so many."""
        ...

    def holds_ready(self) -> bool:
        """Whether jobs claimed ahead wait for a worker (they go stale in a second)."""
        ...

    def give_back_stale(self) -> None: ...

    def claimed(self, jobs: Sequence[Job], claimed: tuple[int, int], lease_until: float) -> None:
        """A claim sent at `claimed[0]` (ns) brought `jobs` at `claimed[1]`, their leases
        valid until `lease_until` (time.monotonic())."""
        ...


class Dispatcher:
    """Sends a pool's claims until stopped; `claim(n)` claims up to n jobs."""

    def __init__(
        self,
        pool: Claiming,
        writer: OutcomeWriter,
        sizing: ClaimSizing,
        claim: Callable[[int], Awaitable[Claimed]],
        *,
        lease_seconds: float,
        poll_seconds: float,
    ) -> None:
        self._pool = pool
        self._writer = writer
        self._sizing = sizing
        self._claim = claim
        self._lease = lease_seconds
        self._poll = poll_seconds
        self._stopping = asyncio.Event()
        self._woken = asyncio.Event()
        # Set by everything the dispatcher may act on: a worker freed, a write settled, a
        # claim returned, a wake-up, stop().
        self._nudged = asyncio.Event()
        # Claims on their way, each with the jobs it asked for (counted as held already).
        self._claims: dict[asyncio.Task[None], int] = {}
        # After a claim came back short, or failed.
        self._rest: Rest | None = None
        # The pool's attempts that ended so far: a claim held back by slots while one of
        # them ended on its way did not carry that ending, so it does not rest.
        self._endings = 0
        # Whether the last claim to come back brought all it asked for: only then is a
        # backlog known, and a second claim worth sending beside the first. Woken from
        # idle, the job announced is most likely alone, and two claims would race for
        # its row, each with a commit (docs/design.md: pickup's tail doubled).
        self._backlog = False

    @property
    def requested(self) -> int:
        """The jobs the claims on their way asked for."""
        return sum(self._claims.values())

    def nudge(self) -> None:
        """Something the loop acts on changed: look again."""
        self._nudged.set()

    def wake(self) -> None:
        """Work was enqueued: claim now, even while resting after a short claim."""
        self._woken.set()
        self._nudged.set()

    def attempt_ended(self) -> None:
        """One of the pool's jobs ended: its slot, if a limit counts it, frees."""
        self._endings += 1
        if self._rest is not None and self._rest.on_ending:
            self._rest = None
        self._nudged.set()

    def end_rest(self) -> None:
        """Claim now, whatever rest the last claim began (a resumed queue)."""
        self._rest = None

    def stop(self) -> None:
        self._stopping.set()
        self._nudged.set()

    async def run(self) -> None:
        """Send claims until `stop()`; then wait for the claims on their way (their jobs
        are the pool's to give back), and flush the writer."""
        try:
            while not self._stopping.is_set():
                self._nudged.clear()
                self._pool.give_back_stale()
                wanted = min(self._pool.wanted(self.requested), self._sizing.size())
                if self._may_send(wanted):
                    self._send(wanted)
                    continue
                if not self._claims:
                    # Nothing on its way to carry them: what waits for a claim is written.
                    self._writer.flush()
                    if self._rest is not None:
                        await self._rest_out(self._rest)
                        continue
                # Bounded while jobs wait in the prefetch, so that stale ones are given back
                # in time.
                held = self._pool.holds_ready()
                await self._nudge(at_most=PREFETCH_HOLD_SECONDS if held else None)
            await asyncio.gather(*self._claims, return_exceptions=True)
        except asyncio.CancelledError:
            # Cancelled: so are the claims on their way (their endings go back to the
            # writer).
            tasks = list(self._claims)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            # No claim comes after this one: endings that would have waited for one (the
            # releases of a forced shutdown too) are written by the writer's own task.
            self._writer.flush()

    def _may_send(self, wanted: int) -> bool:
        if wanted <= 0 or self._rest is not None or not self._pool.may_claim():
            return False
        if not self._claims:
            return True
        # A second claim only under a backlog (`_backlog`).
        return self._sizing.another(
            in_flight=len(self._claims), backlog=self._backlog, wanted=wanted
        )

    def _send(self, wanted: int) -> None:
        # Cleared before the claim, so a wake() arriving while it runs is not lost.
        self._woken.clear()
        task = asyncio.create_task(self._round(wanted), name="jobqueue claim")
        self._claims[task] = wanted

    async def _round(self, wanted: int) -> None:
        """One claim, and what it brought handed to the pool."""
        claim_started = time.time_ns()
        sent = time.monotonic()
        endings = self._endings
        # The lease runs from when the statement ran, which is after this.
        lease_until = sent + self._lease
        try:
            jobs = await self._claim(wanted)
        except Exception as error:
            log_failure(_log, "claiming jobs failed; trying again in %gs", error, self._poll)
            self._rest = Rest(time.monotonic() + self._poll)
            return
        finally:
            # In the same step as the jobs join the pool below: the loop never sees them
            # both requested and held.
            task = asyncio.current_task()
            assert task is not None
            del self._claims[task]
            self._nudged.set()
        self._sizing.prefetch.claimed(time.monotonic() - sent)
        self._backlog = len(jobs) >= wanted
        if jobs.retry_in is not None:
            # The queue's rate lets it start no more now: rest until its window lets one
            # more start (a wake-up cannot open it sooner), the poll interval at most.
            opens = min(jobs.retry_in.total_seconds(), self._poll)
            self._rest = Rest(time.monotonic() + opens)
        elif len(jobs) < wanted:
            by_slots = bool(jobs.held_back & _SLOTS)
            if self._rest is None and not (by_slots and self._endings > endings):
                # Nothing more is due, or running jobs fill a limit's slots: rest for the
                # poll interval, until a wake(), or for slots until one of ours ends; for
                # keys' or types' rates, until the first of their windows opens.
                rest = self._poll
                if jobs.windows_open_in is not None:
                    rest = min(rest, jobs.windows_open_in.total_seconds())
                self._rest = Rest(time.monotonic() + rest, on_wake=True, on_ending=by_slots)
        elif self._rest is not None and self._rest.on_wake:
            # A full claim that was on its way beside a short one: more may be due after
            # all, so the short one's rest is over.
            self._rest = None
        self._pool.claimed(jobs, (claim_started, time.time_ns()), lease_until)

    async def _rest_out(self, rest: Rest) -> None:
        """Wait out a rest from claiming: until it ends (`Rest`), or stop."""
        left = rest.until - time.monotonic()
        if left > 0 and not (rest.on_wake and self._woken.is_set()):
            await self._nudge(at_most=left)
            if not (rest.on_wake and self._woken.is_set()) and time.monotonic() < rest.until:
                return  # nudged by something else (or its rest ended: `attempt_ended`)
        if self._rest is rest:
            self._rest = None

    async def _nudge(self, *, at_most: float | None) -> None:
        """Return once nudged, or after `at_most` seconds."""
        if at_most is None:
            await self._nudged.wait()
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(at_most):
                await self._nudged.wait()
