"""Pausing and resuming queues, and summing up what waits in each and who consumes it, on
PostgreSQL (`queries/queues.py`, `queries/listing.COUNT_BY_QUEUE` or `COUNT_IN_QUEUE`, and
`queries/processes.CONSUMERS_BY_QUEUE`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.driver import fetch_pooled
from jobqueue.adapters.postgres.failures import store_failures
from jobqueue.adapters.postgres.queries.listing import COUNT_BY_QUEUE, COUNT_IN_QUEUE
from jobqueue.adapters.postgres.queries.processes import CONSUMERS_BY_QUEUE
from jobqueue.adapters.postgres.queries.queues import (
    DECLARE_LIMITS,
    PAUSE_QUEUE,
    PAUSED_AMONG,
    QUEUE_STATE,
    QUEUE_STATES,
    RESUME_QUEUE,
    SET_LIMITS,
    UNDECLARE_LIMITS,
)
from jobqueue.adapters.postgres.queue_counts import CountCache, Rows
from jobqueue.domain.flow import LimitsSource, QueueLimits, Rate, type_rates
from jobqueue.domain.queues import QueueState, QueueSummary
from jobqueue.domain.status import COUNTED, Status


class PostgresQueues:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._counts = CountCache(self._count_by_queue)

    async def set_paused(self, name: str, paused: bool) -> QueueState:
        """Pause or resume `name`, announced to every worker process at commit. Pausing
        a paused queue keeps its first `paused_at`."""
        with store_failures():
            (row,) = await fetch_pooled(
                self._engine, PAUSE_QUEUE if paused else RESUME_QUEUE, {"name": name}
            )
        return state_from_row(row)

    async def set_limits(self, name: str, limits: QueueLimits) -> QueueState:
        """An operator's limits for `name` (NO_LIMITS lifts them): obeyed by every claim
        from the commit on, and kept whatever settings declare until changed again."""
        source = LimitsSource.OPERATOR if limits.any else None
        with store_failures():
            (row,) = await fetch_pooled(
                self._engine, SET_LIMITS, _limit_values(name, limits, source)
            )
        return state_from_row(row)

    async def declare_limits(self, name: str, limits: QueueLimits) -> QueueState | None:
        """Limits a process's settings declare for `name` (NO_LIMITS: none), unless an
        operator set them; the state written, or None when left alone."""
        with store_failures():
            if not limits.any:
                await fetch_pooled(self._engine, UNDECLARE_LIMITS, {"name": name})
                return None
            values = _limit_values(name, limits, LimitsSource.SETTINGS)
            rows = await fetch_pooled(self._engine, DECLARE_LIMITS, values)
        return state_from_row(rows[0]) if rows else None

    async def paused(self, names: Sequence[str]) -> set[str]:
        """Which of `names` are paused."""
        with store_failures():
            rows = await fetch_pooled(self._engine, PAUSED_AMONG, {"names": list(names)})
        return {row["name"] for row in rows}

    async def summaries(self, max_age: timedelta | None = None) -> list[QueueSummary]:
        """Every queue that has live or held jobs, a row of its own or a live consumer,
        by name; counted now, or up to about `max_age` ago (`queue_counts.py`). Pauses
        and consumers are read now either way."""
        counted = await self._counted(max_age)
        with store_failures():
            states = await fetch_pooled(self._engine, QUEUE_STATES, {})
            consumed = await fetch_pooled(self._engine, CONSUMERS_BY_QUEUE, {})
        names = {row["queue"] for row in counted} | {row["name"] for row in states}
        names |= {row["queue"] for row in consumed}
        return _summed(sorted(names), counted, states, consumed)

    async def summary(self, name: str, max_age: timedelta | None = None) -> QueueSummary:
        """`name`'s summary alone, read from its own range of the indexes (or from the
        counts of every queue, up to about `max_age` old); a queue nothing names yet is
        running and holds no jobs."""
        if max_age is None:
            with store_failures():
                counted = await fetch_pooled(self._engine, COUNT_IN_QUEUE, {"queue": name})
        else:
            counted = [row for row in await self._counted(max_age) if row["queue"] == name]
        with store_failures():
            states = await fetch_pooled(self._engine, QUEUE_STATE, {"name": name})
            consumed = await fetch_pooled(self._engine, CONSUMERS_BY_QUEUE, {})
        (summary,) = _summed([name], counted, states, consumed)
        return summary

    async def _counted(self, max_age: timedelta | None) -> Rows:
        if max_age is None:
            return await self._count_by_queue()
        rows, age = await self._counts.rows(max_age)
        # The oldest due job has waited as much longer as the counts are old.
        return [
            {**row, "oldest_due_age": row["oldest_due_age"] + age}
            if row["oldest_due_age"] is not None
            else row
            for row in rows
        ]

    async def _count_by_queue(self) -> Rows:
        with store_failures():
            return await fetch_pooled(self._engine, COUNT_BY_QUEUE, {})


def _summed(
    names: Sequence[str],
    counted: Sequence[Mapping[str, Any]],
    states: Sequence[Mapping[str, Any]],
    consumed: Sequence[Mapping[str, Any]],
) -> list[QueueSummary]:
    """The summaries of `names`, in that order, from the rows of the counts (a row per
    queue and counted status), the pauses and the consumers."""
    known = {row["name"]: state_from_row(row) for row in states}
    consumers = {row["queue"]: row["consumers"] for row in consumed}
    counts = {name: dict.fromkeys(COUNTED, 0) for name in names}
    due_now: dict[str, int] = dict.fromkeys(names, 0)
    oldest: dict[str, timedelta | None] = dict.fromkeys(names)
    for row in counted:
        counts[row["queue"]][Status(row["status"])] = row["jobs"]
        if row["status"] == Status.PENDING:
            due_now[row["queue"]] = row["due"]
            oldest[row["queue"]] = row["oldest_due_age"]
    return [
        QueueSummary(
            known.get(name, QueueState(name, None)),
            counts[name],
            due_now[name],
            oldest[name],
            consumers.get(name, 0),
        )
        for name in names
    ]


def state_from_row(row: Mapping[str, Any]) -> QueueState:
    """A row of `queries/queues._STATE` as the domain's `QueueState`."""
    rated = _rated(row["type_rates"])
    limits = QueueLimits(
        row["concurrency"],
        _rate(row["rate_limit"], row["rate_period"]),
        row["key_concurrency"],
        _rate(row["key_rate_limit"], row["key_rate_period"]),
        type_rates(pair for pair, _ in rated),
    )
    source = row["limits_source"]
    return QueueState(
        row["name"],
        row["paused_at"],
        limits,
        None if source is None else LimitsSource(source),
        row["running"],
        row["started"],
        tuple((name, started) for (name, _), started in rated),
    )


def _rated(rows: list[list[Any]] | None) -> list[tuple[tuple[str, Rate], int]]:
    """The rated types of `queries/queues._state` ([type, limit, period in seconds, starts
    in its window] each), with their starts in the window."""
    return [
        ((name, Rate(limit, timedelta(seconds=float(seconds)))), int(started))
        for name, limit, seconds, started in rows or ()
    ]


def _rate(limit: int | None, period: timedelta | None) -> Rate | None:
    return None if limit is None or period is None else Rate(limit, period)


def _limit_values(name: str, limits: QueueLimits, source: LimitsSource | None) -> dict[str, object]:
    rate, key_rate = limits.rate, limits.key_rate
    return {
        "rated_types": [job_type for job_type, _ in limits.type_rates],
        "rated_limits": [each.limit for _, each in limits.type_rates],
        "rated_periods": [each.period for _, each in limits.type_rates],
        "name": name,
        "concurrency": limits.concurrency,
        "rate_limit": None if rate is None else rate.limit,
        "rate_period": None if rate is None else rate.period,
        "key_concurrency": limits.key_concurrency,
        "key_rate_limit": None if key_rate is None else key_rate.limit,
        "key_rate_period": None if key_rate is None else key_rate.period,
        "source": None if source is None else source.value,
    }
