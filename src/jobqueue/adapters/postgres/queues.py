"""Pausing and resuming queues, and summing up what waits in each, on PostgreSQL.

A pause is a row of `queues`; the claim checks it (`PAUSED`) in its own statement.
Pausing and resuming notify `PAUSES_CHANNEL` in the same transaction, so every worker
process hears of it as it commits; workers also re-read the pauses every
`PAUSE_CHECK_INTERVAL` in case a notification was lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from sqlalchemy import ColumnElement, Text, bindparam, exists, func, literal, select, union_all
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.database import autocommit
from jobqueue.adapters.postgres.failures import store_failures
from jobqueue.adapters.postgres.schema import jobs, queues, status_literal
from jobqueue.domain.queues import QueueState, QueueSummary
from jobqueue.domain.status import COUNTED, Status

# Never built from anything a client sent.
PAUSES_CHANNEL = "jobqueue_queues"

# Whether the claim's queue (its `queue` parameter) is paused: part of the claim, so a
# claim that starts after a pause commits takes nothing, whatever the process knows.
PAUSED: ColumnElement[bool] = exists().where(
    queues.c.name == bindparam("queue", type_=Text()), queues.c.paused_at.is_not(None)
)

_ANNOUNCE = func.pg_notify(PAUSES_CHANNEL, "")


class PostgresQueues:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._autocommit = autocommit(engine)

    async def set_paused(self, name: str, paused: bool) -> QueueState:
        """Pause or resume `name`, announced to every worker process at commit. Pausing
        a paused queue keeps its first `paused_at`."""
        upsert = insert(queues).values(
            name=name, paused_at=func.now() if paused else None, updated_at=func.now()
        )
        statement = upsert.on_conflict_do_update(
            index_elements=[queues.c.name],
            set_={
                "paused_at": func.coalesce(queues.c.paused_at, func.now()) if paused else None,
                "updated_at": func.now(),
            },
        ).returning(queues.c.name, queues.c.paused_at)
        with store_failures():
            async with self._engine.begin() as connection:
                row = (await connection.execute(statement)).one()
                await connection.execute(select(_ANNOUNCE))
        return QueueState(row.name, row.paused_at)

    async def paused(self, names: Sequence[str]) -> set[str]:
        """Which of `names` are paused."""
        statement = select(queues.c.name).where(
            queues.c.name.in_(list(names)),
            queues.c.paused_at.is_not(None),
        )
        with store_failures():
            async with self._autocommit.connect() as connection:
                return set((await connection.execute(statement)).scalars())

    async def summaries(self) -> list[QueueSummary]:
        """Every queue that has live or held jobs or a pause row, by name."""
        due = jobs.c.run_at <= func.now()
        # One aggregate per counted status, each over that status's partial index (the
        # pending one is ordered by queue already), rather than one over the table.
        per_status = [
            select(
                jobs.c.queue,
                literal(status.value, Text).label("status"),
                func.count().label("jobs"),
                func.count().filter(due).label("due"),
                (func.now() - func.min(jobs.c.run_at).filter(due)).label("oldest_due_age"),
            )
            .where(jobs.c.status == status_literal(status))
            .group_by(jobs.c.queue)
            for status in COUNTED
        ]
        with store_failures():
            async with self._autocommit.connect() as connection:
                counted = (await connection.execute(union_all(*per_status))).all()
                states = (await connection.execute(select(queues))).all()
        paused_at = {row.name: row.paused_at for row in states}
        names = sorted({row.queue for row in counted} | set(paused_at))
        counts = {name: dict.fromkeys(COUNTED, 0) for name in names}
        due_now: dict[str, int] = dict.fromkeys(names, 0)
        oldest: dict[str, timedelta | None] = dict.fromkeys(names)
        for row in counted:
            counts[row.queue][Status(row.status)] = row.jobs
            if row.status == Status.PENDING:
                due_now[row.queue] = row.due
                oldest[row.queue] = row.oldest_due_age
        return [
            QueueSummary(
                QueueState(name, paused_at.get(name)), counts[name], due_now[name], oldest[name]
            )
            for name in names
        ]
