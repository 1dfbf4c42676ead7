"""The live worker processes on PostgreSQL (`queries/processes.py`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.driver import fetch_pooled
from jobqueue.adapters.postgres.failures import store_failures
from jobqueue.adapters.postgres.queries.processes import (
    CONSUMERS_BY_QUEUE,
    HEARTBEAT,
    LEAVE,
    LIVE_PROCESSES,
    NEWLY_UNCONSUMED,
)
from jobqueue.domain.processes import LiveProcess, ProcessInfo, Unconsumed


class PostgresProcesses:
    """`ports.ProcessRegistry` on PostgreSQL."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def heartbeat(self, process: ProcessInfo, ttl: timedelta) -> None:
        values = {
            "id": process.id,
            "host": process.host,
            "pid": process.pid,
            "version": process.version,
            "queues": list(process.queues),
            "types": list(process.types),
            "concurrency": process.concurrency,
            "queue_concurrency": list(process.queue_concurrency) or None,
            "running": process.running,
            "ttl": ttl,
        }
        with store_failures():
            await fetch_pooled(self._engine, HEARTBEAT, values)

    async def leave(self, process_id: UUID) -> None:
        with store_failures():
            await fetch_pooled(self._engine, LEAVE, {"id": process_id})

    async def live(self) -> Sequence[LiveProcess]:
        with store_failures():
            rows = await fetch_pooled(self._engine, LIVE_PROCESSES, {})
        return [
            LiveProcess(
                ProcessInfo(
                    id=row["id"],
                    host=row["host"],
                    pid=row["pid"],
                    version=row["version"],
                    queues=tuple(row["queues"]),
                    types=tuple(row["types"]),
                    concurrency=row["concurrency"],
                    running=row["running"],
                    queue_concurrency=tuple(row["queue_concurrency"] or ()),
                ),
                started_at=row["started_at"],
                heartbeat_at=row["heartbeat_at"],
                read_at=row["read_at"],
            )
            for row in rows
        ]

    async def newly_unconsumed(self, grace: timedelta) -> Sequence[Unconsumed]:
        with store_failures():
            rows = await fetch_pooled(self._engine, NEWLY_UNCONSUMED, {"grace": grace})
        return [Unconsumed(row["queue"], row["due"]) for row in rows]

    async def consumers(self) -> Mapping[str, int]:
        """How many live processes consume each queue (queues none consumes are absent)."""
        with store_failures():
            rows = await fetch_pooled(self._engine, CONSUMERS_BY_QUEUE, {})
        return {row["queue"]: row["consumers"] for row in rows}
