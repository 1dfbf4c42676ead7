"""A worker process whose job kills it mid-attempt, for the poison-pill test.

Usage: python -m tests.integration.worker_victim DATABASE_URL LEASE_MILLISECONDS

Runs one pool with one worker; the "poison" handler ends the process at once with
`os._exit`, the way a segfault or the OOM killer would: no cleanup, no outcome write,
only a lease left to expire.
"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import replace
from datetime import timedelta
from typing import Any

from jobqueue.adapters.payloads import MsgspecPayloadDecoder
from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.entrypoints.config.settings import Settings
from jobqueue.entrypoints.worker.pool import WorkerPool
from jobqueue.entrypoints.worker.pool_config import pool_config

# Distinct from the 1 of an uncaught exception: the test knows the handler did it.
KILLED_BY_JOB = 17


async def serve(url: str, lease: timedelta) -> None:
    registry = Registry()

    @registry.handler("poison")
    async def poison(ctx: JobContext, payload: Any) -> None:
        os._exit(KILLED_BY_JOB)

    engine = create_engine(url, pool_size=1)
    config = replace(
        pool_config(Settings()),
        workers=1,
        lease_duration=lease,
        job_timeout=timedelta(seconds=30),
        poll_interval=timedelta(milliseconds=20),
    )
    try:
        await WorkerPool(PostgresJobStore(engine), registry, MsgspecPayloadDecoder(), config).run()
    finally:
        await engine.dispose()


def main() -> None:
    url, lease_ms = sys.argv[1], int(sys.argv[2])
    asyncio.run(serve(url, timedelta(milliseconds=lease_ms)))


if __name__ == "__main__":
    main()
