"""Response bodies about queues: a queue's limits, its state (paused, limits), and its
summary with depth and work in progress."""

from __future__ import annotations

from datetime import datetime

import msgspec

from jobqueue.domain.queues import QueueState, QueueSummary
from jobqueue.domain.status import Status
from jobqueue.wire.records import utc


class QueueLimitsView(msgspec.Struct, frozen=True):
    """A queue's limits and their use now; null: no such limit."""

    # At most this many running at once, across processes; `running`: running now.
    concurrency: int | None = None
    running: int | None = None
    # At most so many starts within any window of a period ("100/m"); `started`: the
    # starts within the window now.
    rate: str | None = None
    started: int | None = None
    # "operator" (held until an operator changes them) or "settings" (QUEUE_LIMITS).
    set_by: str | None = None
    # At most this many running at once per partition key; at most so many starts of one
    # key within any window of a period ("10/m").
    key_concurrency: int | None = None
    key_rate: str | None = None
    # Each rated job type's rate ("10/s"), and its starts within its window now, by type;
    # null while the queue has no type rates.
    type_rates: dict[str, str] | None = None
    type_started: dict[str, int] | None = None

    @classmethod
    def of(cls, state: QueueState) -> QueueLimitsView:
        limits, source = state.limits, state.limits_source
        return cls(
            concurrency=limits.concurrency,
            running=state.running,
            rate=None if limits.rate is None else str(limits.rate),
            started=state.started,
            set_by=None if source is None else source.value,
            key_concurrency=limits.key_concurrency,
            key_rate=None if limits.key_rate is None else str(limits.key_rate),
            type_rates={name: str(rate) for name, rate in limits.type_rates} or None,
            type_started=dict(state.type_started) or None,
        )


class QueueStateView(msgspec.Struct, frozen=True):
    """A queue's pause and limits, as `POST /queues/{name}/pause|resume` and
    `PUT /queues/{name}/limits` answer them."""

    name: str
    paused: bool
    # When it was paused, by the database's clock; null while it runs.
    paused_at: datetime | None
    limits: QueueLimitsView = QueueLimitsView()

    @classmethod
    def of(cls, state: QueueState) -> QueueStateView:
        return cls(state.name, state.paused, utc(state.paused_at), QueueLimitsView.of(state))


class QueueRecord(msgspec.Struct, frozen=True):
    """One queue in `GET /queues`."""

    name: str
    paused: bool
    paused_at: datetime | None
    # Jobs per live or held status; finished jobs are history, not counted here.
    jobs: dict[Status, int]
    # Of the pending jobs: due now, and scheduled for later.
    due: int
    scheduled: int
    # How long the longest-waiting due job has been due; null when none is due.
    oldest_due_age_seconds: float | None
    # How many live worker processes consume the queue; `unconsumed`: due jobs wait and
    # none does, so they wait until one starts. Defaults: an older service has neither.
    consumers: int = 0
    unconsumed: bool = False
    # Its limits and their use; all null without limits (and from an older service).
    limits: QueueLimitsView = QueueLimitsView()

    @classmethod
    def of(cls, summary: QueueSummary) -> QueueRecord:
        state, age = summary.state, summary.oldest_due_age
        return cls(
            name=state.name,
            paused=state.paused,
            paused_at=utc(state.paused_at),
            jobs=dict(summary.counts),
            due=summary.due,
            scheduled=summary.scheduled,
            oldest_due_age_seconds=None if age is None else age.total_seconds(),
            consumers=summary.consumers,
            unconsumed=summary.unconsumed,
            limits=QueueLimitsView.of(state),
        )


class QueueList(msgspec.Struct, frozen=True):
    queues: list[QueueRecord]
