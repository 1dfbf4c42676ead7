"""The dashboard's rollup on PostgreSQL (`queries/rollup.py`): `ports.ThroughputRollup`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.driver import fetch_pooled
from jobqueue.adapters.postgres.failures import store_failures
from jobqueue.adapters.postgres.queries.rollup import ADD, PRUNE, SERIES
from jobqueue.adapters.postgres.schema_workers import PICKUP_COLUMNS, ROLLUP_COUNTERS
from jobqueue.domain.throughput import RollupCounts, Slot, Window


class PostgresRollup:
    """`ports.ThroughputRollup` on PostgreSQL."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def add(self, tallies: Mapping[str, RollupCounts]) -> None:
        if not tallies:
            return
        queues = sorted(tallies)
        counted = [tallies[queue] for queue in queues]
        values: dict[str, Any] = {"queue": queues}
        for name in ROLLUP_COUNTERS:
            values[name] = [getattr(tally, name) for tally in counted]
        values["pickup_seconds"] = [tally.pickup_seconds for tally in counted]
        for index, name in enumerate(PICKUP_COLUMNS):
            values[name] = [tally.pickup_buckets[index] for tally in counted]
        with store_failures():
            await fetch_pooled(self._engine, ADD, values)

    async def series(self, window: Window, queue: str | None = None) -> Sequence[Slot]:
        values = {"step": window.step, "points": window.points, "queue": queue}
        with store_failures():
            rows = await fetch_pooled(self._engine, SERIES, values)
        return [
            Slot(
                at=row["at"],
                completed=row["completed"],
                failed=row["failed"],
                retried=row["retried"],
                picked=row["picked"],
                pickup_seconds=row["pickup_seconds"],
                pickup_buckets=tuple(row[name] for name in PICKUP_COLUMNS),
            )
            for row in rows
        ]

    async def prune(self, older_than: timedelta, limit: int) -> int:
        values = {"older_than": older_than, "limit": limit}
        with store_failures():
            return len(await fetch_pooled(self._engine, PRUNE, values))
