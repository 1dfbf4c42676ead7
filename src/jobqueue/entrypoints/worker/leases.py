"""Lease renewal: a heartbeat extending every lease a pool holds, in one fenced statement.

A lease is held from the claim until the attempt's outcome is written (or given up),
however long the handler runs, so `JOB_TIMEOUT` need not fit inside `LEASE_DURATION`:
a crashed process stops renewing, and its jobs come back about one `LEASE_DURATION`
after it died. Renewals go out every third of the lease, so one that fails (the database
away for a moment) leaves time for the next before anything runs out.

Two things end a lease early for the pool: the store not returning it from a renewal
(the job was recovered or claimed elsewhere), and the lease running out by this
process's own clock because no renewal got through in time (the database unreachable:
another process may be recovering the job). Either way the attempt is told it lost its
lease, and its outcome is not written.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Protocol

from jobqueue.domain.errors import StoreUnavailable
from jobqueue.domain.job import Lease
from jobqueue.domain.ports import JobStore

_log = logging.getLogger("jobqueue.worker")


class LeaseHolder(Protocol):
    def held(self) -> Mapping[Lease, float]:
        """Every lease held now, with when it runs out (time.monotonic())."""
        ...

    def renewed(self, leases: set[Lease], until: float) -> None:
        """These leases were extended: they now run out at `until` (time.monotonic())."""

    def lost(self, lease: Lease) -> bool:
        """This lease is no longer held: stop its attempt, write no outcome for it.
        Return False when the holder had let it go already, or is writing its outcome
        (whose answer then says whether it was lost)."""


class LeaseKeeper:
    """Renews the leases of `holder` every `lease / 3` until `stop()`."""

    def __init__(
        self,
        store: JobStore,
        holder: LeaseHolder,
        lease: timedelta,
        *,
        timeout: timedelta,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if lease <= timedelta(0):
            raise ValueError("the lease must be positive")
        self._store = store
        self._holder = holder
        self._lease = lease
        self._every = lease.total_seconds() / 3
        self._timeout = timeout.total_seconds()
        self._clock = clock
        self._stopping = asyncio.Event()

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        while not self._stopping.is_set():
            try:
                async with asyncio.timeout(self._every):
                    await self._stopping.wait()
            except TimeoutError:
                pass
            await self.renew_once()

    async def renew_once(self) -> None:
        """Renew every held lease once; report those lost or run out."""
        held = dict(self._holder.held())
        if not held:
            return
        started = self._clock()
        try:
            async with asyncio.timeout(self._timeout):
                renewed = await self._store.renew(list(held), self._lease)
        except (StoreUnavailable, TimeoutError) as error:
            _log.warning(
                "renewing leases failed; trying again in %gs",
                self._every,
                extra={"count": len(held), "error": f"{type(error).__name__}: {error}"},
            )
            self._expire(held)
            return
        except Exception:
            _log.exception("renewing leases failed", extra={"count": len(held)})
            self._expire(held)
            return
        # Counted from before the statement: the store's clock set the new expiry later.
        self._holder.renewed(renewed, started + self._lease.total_seconds())
        for lease in held.keys() - renewed:
            if self._holder.lost(lease):
                _log.warning(
                    "lease lost: the job was cancelled, recovered or claimed elsewhere",
                    extra={"job_id": str(lease.job_id), "lease_token": lease.token},
                )

    def _expire(self, held: Mapping[Lease, float]) -> None:
        now = self._clock()
        for lease, until in held.items():
            if until <= now and self._holder.lost(lease):
                _log.warning(
                    "lease ran out without a renewal; another process may recover the job",
                    extra={"job_id": str(lease.job_id), "lease_token": lease.token},
                )
