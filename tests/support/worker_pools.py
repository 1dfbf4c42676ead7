"""Worker pools against a real PostgreSQL, each on an engine of its own as another
process's would be, and what their tests share: a pool's config, a store whose lease
renewals never arrive, waiting until a condition holds, and a job's lease recovered once
it has run out."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from uuid import UUID

from jobqueue.adapters.payloads import MsgspecPayloadDecoder
from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.backoff import Backoff
from jobqueue.domain.job import Job, Lease
from jobqueue.domain.registry import Registry
from jobqueue.domain.status import Status
from jobqueue.entrypoints.worker.lease_recovery import LeaseRecovery
from jobqueue.entrypoints.worker.pool import WorkerPool
from jobqueue.entrypoints.worker.pool_config import PoolConfig
from tests.fakes import RecordingObserver

DEADLINE_SECONDS = 90.0
SHORT_LEASE = timedelta(milliseconds=300)

CONFIG = PoolConfig(
    workers=4,
    job_timeout=timedelta(seconds=60),
    lease_duration=timedelta(minutes=5),
    poll_interval=timedelta(milliseconds=20),
    shutdown_timeout=timedelta(seconds=30),
    outcome_timeout=timedelta(seconds=30),
    backoff=Backoff(timedelta(milliseconds=10), timedelta(milliseconds=100)),
)


async def until(condition: Callable[[], Awaitable[bool]], what: str) -> None:
    """Poll `condition` until it holds; fail after a generous deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_SECONDS
    while not await condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        await asyncio.sleep(0.02)


class FrozenStore(PostgresJobStore):
    """A store whose lease renewals never reach the database, though they look as if
    they did: the view of a process frozen for a while (a long GC or VM pause, SIGSTOP)
    that believes its leases hold while others recovered its jobs. Its outcome writes
    still reach the database, where the fencing must refuse them."""

    async def renew(self, leases: Sequence[Lease], lease: timedelta) -> set[Lease]:
        return set(leases)


@asynccontextmanager
async def pool_on_own_engine(
    database_url: str,
    registry: Registry,
    config: PoolConfig = CONFIG,
    observer: RecordingObserver | None = None,
    store_class: type[PostgresJobStore] = PostgresJobStore,
) -> AsyncIterator[WorkerPool]:
    """A pool with its own engine, as another process would have; stopped on exit."""
    engine = create_engine(database_url, pool_size=2)
    pool = WorkerPool(
        store_class(engine), registry, MsgspecPayloadDecoder(), config, observer=observer
    )
    task = asyncio.create_task(pool.run())
    try:
        yield pool
    finally:
        pool.stop()
        try:
            await asyncio.wait_for(task, DEADLINE_SECONDS)
        finally:
            await engine.dispose()


async def recover_when_expired(store: PostgresJobStore, job_id: UUID) -> Job:
    """Run recovery until the lease of `job_id` has run out and it was recovered."""
    recovery = LeaseRecovery(store, timedelta(seconds=1))
    recovered: list[Job] = []

    async def recovered_it() -> bool:
        await recovery.run_once()
        job = await store.get(job_id)
        if job.status is not Status.PROCESSING:
            recovered.append(job)
        return bool(recovered)

    await until(recovered_it, f"the lease of job {job_id} expired and was recovered")
    return recovered[0]
