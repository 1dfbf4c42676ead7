"""Worker pools running the no-op handler for the length of a scenario."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.payloads import MsgspecPayloadDecoder
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.bench.errors import BenchError
from jobqueue.bench.probe import StartProbe, noop_registry
from jobqueue.entrypoints.config.settings import Settings
from jobqueue.entrypoints.worker import pool_config as pool_configs
from jobqueue.entrypoints.worker.pool import WorkerPool
from jobqueue.entrypoints.worker.pool_config import PoolConfig

# Idle pools look for due jobs this often; pure-polling pickup latency is bounded by it.
POLL_INTERVAL = timedelta(milliseconds=100)


def pool_config(workers: int) -> PoolConfig:
    # Generous limits: no-op jobs never come near them, and a lease longer than the job
    # timeout plus the outcome write keeps the pool from warning about it.
    return replace(
        pool_configs.pool_config(Settings()),
        workers=workers,
        job_timeout=timedelta(seconds=30),
        lease_duration=timedelta(minutes=5),
        poll_interval=POLL_INTERVAL,
        shutdown_timeout=timedelta(seconds=30),
        outcome_timeout=timedelta(seconds=30),
    )


class RunningPools:
    def __init__(self, pools: list[WorkerPool], tasks: list[asyncio.Task[None]]) -> None:
        self._pools = pools
        self._tasks = tasks

    def wake(self) -> None:
        for pool in self._pools:
            pool.wake()

    def check(self) -> None:
        """Raise if a pool stopped on its own: the scenario would otherwise wait forever."""
        for task in self._tasks:
            if task.done():
                error = None if task.cancelled() else task.exception()
                raise BenchError(f"a worker pool stopped during the run: {error!r}") from error


@asynccontextmanager
async def running_pools(
    engine: AsyncEngine, probe: StartProbe, count: int, workers: int
) -> AsyncIterator[RunningPools]:
    """`count` pools of `workers` workers on one engine, as in one process; each has its
    own dispatcher, so `count` claims can be in flight at once. Stopped gracefully on exit."""
    store = PostgresJobStore(engine)
    registry = noop_registry(probe)
    pools = [
        WorkerPool(store, registry, MsgspecPayloadDecoder(), pool_config(workers))
        for _ in range(count)
    ]
    tasks = [
        asyncio.create_task(pool.run(), name=f"bench pool {number}")
        for number, pool in enumerate(pools, 1)
    ]
    try:
        yield RunningPools(pools, tasks)
    finally:
        for pool in pools:
            pool.stop()
        await asyncio.gather(*tasks)
