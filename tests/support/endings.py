"""Attempt endings written through the store's one batched write, one at a time, the way
tests want them: the job as it is afterwards, or `LeaseLost`."""

from __future__ import annotations

from collections.abc import Sequence

from jobqueue.domain.errors import LeaseLost
from jobqueue.domain.job import Job, Lease
from jobqueue.domain.outcome import Decision
from jobqueue.domain.ports import JobStore


async def record(store: JobStore, lease: Lease, decision: Decision) -> Job:
    """Write one ending; raise `LeaseLost` when `lease` no longer held the job."""
    if lease not in await store.record_many([(lease, decision)]):
        raise LeaseLost(lease.job_id, lease.token)
    return await store.get(lease.job_id)


async def complete_many(store: JobStore, leases: Sequence[Lease]) -> set[Lease]:
    """Complete every job still held by its lease, in one write; return those that held."""
    return await store.record_many([(lease, Decision.complete()) for lease in leases])
