"""The tables as SQLAlchemy Core metadata: what the store queries and Alembic compares.

Alembic's hand-written revisions create these; a test proves they agree.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import fields
from datetime import datetime, timedelta
from types import UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

from sqlalchemy import (
    ARRAY,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    ColumnElement,
    DateTime,
    Index,
    Integer,
    Interval,
    MetaData,
    SmallInteger,
    Table,
    Text,
    literal_column,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID

from jobqueue.domain.fields import (
    DEFAULT_PRIORITY,
    DEFAULT_QUEUE,
    MAX_ATTEMPTS,
    MAX_PRIORITY,
    MIN_ATTEMPTS,
    MIN_PRIORITY,
)
from jobqueue.domain.flow import (
    MAX_CONCURRENCY,
    MAX_PERIOD,
    MAX_RATE,
    MIN_PERIOD,
    LimitsSource,
)
from jobqueue.domain.job import Job
from jobqueue.domain.status import TRAITS, Status

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_name)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "pk": "pk_%(table_name)s",
    }
)


def _quoted(constants: Iterable[Status | LimitsSource]) -> str:
    return ", ".join(f"'{constant.value}'" for constant in constants)


def _interval(duration: timedelta) -> str:
    return f"interval '{duration // timedelta(milliseconds=1)} milliseconds'"


def _rate_checks(prefix: str = "") -> list[CheckConstraint]:
    """The bounds of a rate (`domain/flow.Rate`) kept as `<prefix>rate_limit` starts per
    `<prefix>rate_period`."""
    return [
        CheckConstraint(f"{prefix}rate_limit BETWEEN 1 AND {MAX_RATE}", name=f"{prefix}rate_limit"),
        CheckConstraint(
            f"{prefix}rate_period BETWEEN {_interval(MIN_PERIOD)} AND {_interval(MAX_PERIOD)}",
            name=f"{prefix}rate_period",
        ),
    ]


def _window(*, default: bool) -> list[Column[Any]]:
    """A rate's window: its starts within the period, a time and a count per claim."""
    empty = "{}" if default else None
    return [
        Column("starts", ARRAY(DateTime(timezone=True)), nullable=False, server_default=empty),
        Column("start_counts", ARRAY(Integer), nullable=False, server_default=empty),
    ]


_STATUSES = _quoted(Status)


def _indexed_in(index: str) -> str:
    """The statuses whose rows `index` holds (`TRAITS`), for its predicate."""
    return _quoted(status for status in Status if TRAITS[status].index == index)


# How a `Job` field is stored when its type says it all; a field that may be None is a
# nullable column.
_STORED_AS: dict[object, Any] = {
    str: Text,
    Status: Text,
    int: Integer,
    datetime: DateTime(timezone=True),
    timedelta: Interval,
    bool: Boolean,
    uuid.UUID: UUID(as_uuid=True),
}
# What a field's type does not say: the key, wider or narrower types, JSON, the defaults a
# new row gets from the server (what `NewJob.stored` gives the job returned).
_NOW = text("now()")
_COLUMNS: dict[str, dict[str, Any]] = {
    "id": {"type_": UUID(as_uuid=True), "primary_key": True},
    "payload": {"type_": JSONB, "server_default": text("'{}'::jsonb"), "nullable": False},
    "status": {"server_default": text(f"'{Status.PENDING}'")},
    "attempts": {"server_default": text("0")},
    "run_at": {"server_default": _NOW},
    "lease_token": {"type_": BigInteger, "server_default": text("0")},
    "created_at": {"server_default": _NOW},
    "updated_at": {"server_default": _NOW},
    "queue": {"server_default": text(f"'{DEFAULT_QUEUE}'")},
    "priority": {"type_": SmallInteger, "server_default": text(str(DEFAULT_PRIORITY))},
    # An empty log is NULL: the common job never outlives an attempt.
    "attempt_log": {"type_": JSONB, "nullable": True},
    "snoozes": {"server_default": text("0")},
    "unique_states": {"type_": ARRAY(Text)},
    "result": {"type_": JSONB},
    "progress": {"type_": JSONB},
    "depends_on": {"type_": ARRAY(UUID(as_uuid=True))},
    "run_anyway": {"server_default": text("false")},
    "waiting_for": {"server_default": text("0")},
}
_COLUMNS["id"]["server_default"] = text("gen_random_uuid()")


def _job_columns() -> list[Column[Any]]:
    """A column of `jobs` per field of `Job`, in its order: what each holds is said on the
    field (`domain/job.py`), how it is stored here (`_STORED_AS`, `_COLUMNS`)."""
    hints = get_type_hints(Job)
    columns = []
    for each in fields(Job):
        hint = hints[each.name]
        stored = get_args(hint) if get_origin(hint) in (Union, UnionType) else (hint,)
        optional = type(None) in stored
        extra = dict(_COLUMNS.get(each.name, {}))
        kind = extra.pop("type_", None)
        if kind is None:
            (plain,) = [part for part in stored if part is not type(None)]
            kind = _STORED_AS[plain]
        columns.append(Column(each.name, kind, nullable=extra.pop("nullable", optional), **extra))
    return columns


jobs = Table(
    "jobs",
    metadata,
    *_job_columns(),
    # Someone waits for the job's end (`queries/watches.py`): the triggers of migration
    # 0023 announce it. Not a `Job` field: no one but those triggers reads it.
    Column("watched", Boolean, nullable=False, server_default=text("false")),
    # Some job waits for it (a row of `job_dependencies` names it): migrations 0024 and
    # 0025's triggers release its dependents when it ends. Not a `Job` field either.
    Column("has_dependents", Boolean, nullable=False, server_default=text("false")),
    # The count of `job_waits` the job waits on, when it shares one with the jobs of its
    # graph that wait for the same dependencies (migration 0026); NULL when it waits on
    # a count of its own id. Not a `Job` field: only the store reads it.
    Column("wait_id", UUID(as_uuid=True)),
    CheckConstraint(f"status IN ({_STATUSES})", name="status"),
    # The domain's range, so that no row holds a priority no claim reads. Queue names are
    # checked where jobs are made, not here: a regular-expression CHECK cost a fifth of a
    # bulk COPY's rows per second (measured).
    CheckConstraint(f"priority BETWEEN {MIN_PRIORITY} AND {MAX_PRIORITY}", name="priority"),
    CheckConstraint(f"max_attempts BETWEEN {MIN_ATTEMPTS} AND {MAX_ATTEMPTS}", name="max_attempts"),
    CheckConstraint("attempts >= 0", name="attempts"),
    CheckConstraint("snoozes >= 0", name="snoozes"),
    # A lease exists exactly while a worker holds the job; recovery relies on it.
    CheckConstraint(
        "(status = 'processing') = (locked_until IS NOT NULL)", name="lease_while_processing"
    ),
    # The claim's scan: one queue's pending jobs, by priority, then type, then due order.
    # A claim reads one (priority, type) range at a time, for the types its process runs,
    # so `run_at <= now()` bounds each range, jobs scheduled later are never read, and
    # neither are the jobs of types the process cannot run. Finished rows never enter it.
    # Listing pending jobs reads it too, in the same order.
    Index(
        "ix_jobs_due_by_type",
        "queue",
        "priority",
        "type",
        "run_at",
        "id",
        postgresql_where=text("status = 'pending'"),
    ),
    # The recovery scan: leases that may have run out.
    Index("ix_jobs_lease_expiry", "locked_until", postgresql_where=text("status = 'processing'")),
    Index(
        "uq_jobs_idempotency_key",
        "idempotency_key",
        unique=True,
        postgresql_where=text("idempotency_key IS NOT NULL"),
    ),
    # Finished rows by status, then type, then when they finished (a finished row is
    # never written again, so its updated_at is that moment): listing one type is one
    # range; listing every type, and retention's scan by age, merge the ranges of the
    # types, found by a loose scan of the same index (`adapters/postgres/by_type.py`).
    # One entry per finished row, as an index by (status, updated_at) alone would hold.
    Index(
        "ix_jobs_finished_by_type",
        "status",
        "type",
        "updated_at",
        postgresql_where=text(f"status IN ({_indexed_in('ix_jobs_finished_by_type')})"),
    ),
    # Cancelled rows by type, in an index of their own (`status.TRAITS`), without the
    # status in front: the index holds one, so PostgreSQL drops it from a scan's
    # conditions, and a first column without one left nothing to descend by
    # (migration 0027).
    Index(
        "ix_jobs_cancelled_by_type",
        "type",
        "updated_at",
        postgresql_where=text(f"status IN ({_indexed_in('ix_jobs_cancelled_by_type')})"),
    ),
    # One job per unique key among those in the statuses it counts in: the index, not a
    # read before the insert, decides, so concurrent duplicates cannot both get in. Jobs
    # that are not unique (no key) are not in it, and cost it nothing.
    Index(
        "uq_jobs_unique_key",
        "unique_key",
        unique=True,
        postgresql_where=text("unique_key IS NOT NULL AND status = ANY (unique_states)"),
    ),
    # Dead letters await a person: counted for the queue-depth gauge, listed newest first.
    Index("ix_jobs_dead_letter", "updated_at", postgresql_where=text("status = 'dead_letter'")),
    # A queue's running jobs: a limited queue's slots, counted by its claims
    # (`queries/flow.py`), and a bulk cancel of one queue's running jobs, in lease order.
    Index(
        "ix_jobs_running_by_queue",
        "queue",
        "locked_until",
        postgresql_where=text("status = 'processing'"),
    ),
    # A queue's pending jobs by partition key (`domain/partition.py`), then as the claim
    # orders them within a key: a claim with a per-key limit finds the keys with jobs by a
    # loose scan, and each key's next jobs in one range (`queries/keys.py`). Jobs in no
    # partition are not in it, and cost it nothing.
    Index(
        "ix_jobs_due_by_partition",
        "queue",
        "partition_key",
        "priority",
        "run_at",
        "id",
        postgresql_where=text("status = 'pending' AND partition_key IS NOT NULL"),
    ),
    # Jobs waiting for their dependencies, in submission order (`status.TRAITS`).
    Index("ix_jobs_waiting", "run_at", postgresql_where=text("status = 'waiting'")),
    # The jobs sharing a count, those still waiting: what its last ending releases.
    Index(
        "ix_jobs_wait_id",
        "wait_id",
        postgresql_where=text("status = 'waiting' AND wait_id IS NOT NULL"),
    ),
    # A workflow's jobs in submission order (`GET /workflows/{id}`, its cancel and
    # retry): jobs in none are not in it.
    Index(
        "ix_jobs_workflow",
        "workflow_id",
        "created_at",
        "id",
        postgresql_where=text("workflow_id IS NOT NULL"),
    ),
    # And their running jobs: each key's slots under a per-key limit.
    Index(
        "ix_jobs_running_by_partition",
        "queue",
        "partition_key",
        postgresql_where=text("status = 'processing' AND partition_key IS NOT NULL"),
    ),
)


# Who waits for whom: a row per dependency a count of `job_waits` waited for while it was
# live (`domain/dependencies.py`), kept until that dependency is deleted; `job_id` is the
# count's id (a job's own, or one its jobs share: `jobs.wait_id`), and each job's
# `depends_on` holds its dependencies all. Each ending of a dependency counts its rows
# off the counts, and each retry of it back on (migrations 0024 to 0026).
job_dependencies = Table(
    "job_dependencies",
    metadata,
    Column("depends_on", UUID(as_uuid=True), primary_key=True),
    Column("job_id", UUID(as_uuid=True), primary_key=True),
)

# How many of the dependencies some waiting jobs wait for are still live: a row while,
# and only while, a job waits on it, started from its `waiting_for` (migrations 0025 and
# 0026). A job waiting alone has the count of its own id; the jobs of a graph that wait
# for the same dependencies share one (`jobs.wait_id`), so that a fan-in's ending
# rewrites one count, not one per dependent. Apart from `jobs` so that counting an
# ending rewrites two integers, on a page with room for the new version (fillfactor),
# and no index; the `jobs` rows are written once, when released.
job_waits = Table(
    "job_waits",
    metadata,
    Column("job_id", UUID(as_uuid=True), primary_key=True),
    Column("remaining", Integer, nullable=False),
    postgresql_with={"fillfactor": 50},
)


# A row per queue an operator has paused or resumed; a queue with no row runs. The claim
# reads it by primary key in the same statement, so a pause holds from its commit on.
queues = Table(
    "queues",
    metadata,
    Column("name", Text, primary_key=True),
    Column("paused_at", DateTime(timezone=True), nullable=True),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    # When a process warned that due jobs wait here and no live process consumes the
    # queue; cleared once one does (`queries/processes.py`): one warning per episode.
    Column("unconsumed_warned_at", DateTime(timezone=True), nullable=True),
    # Its limits (`domain/flow.py`), NULL: none; and who set them.
    Column("concurrency", Integer, nullable=True),
    Column("rate_limit", Integer, nullable=True),
    Column("rate_period", Interval, nullable=True),
    # At most so many running jobs, and starts per period, per partition key
    # (`domain/partition.py`); each key's starts are in `key_starts`.
    Column("key_concurrency", Integer, nullable=True),
    Column("key_rate_limit", Integer, nullable=True),
    Column("key_rate_period", Interval, nullable=True),
    Column("limits_source", Text, nullable=True),
    # Whether some of its job types have rates of their own (rows of `type_rates`): the
    # claim learns it from this row, which it reads anyway.
    Column("type_rated", Boolean, nullable=False, server_default=text("false")),
    # The starts within its rate's window, a time and a count per claim (`queries/flow.py`).
    *_window(default=True),
    CheckConstraint(f"concurrency BETWEEN 1 AND {MAX_CONCURRENCY}", name="concurrency"),
    CheckConstraint(f"key_concurrency BETWEEN 1 AND {MAX_CONCURRENCY}", name="key_concurrency"),
    CheckConstraint(f"limits_source IN ({_quoted(LimitsSource)})", name="limits_source"),
    *_rate_checks(),
    CheckConstraint("(rate_limit IS NULL) = (rate_period IS NULL)", name="rate"),
    *_rate_checks("key_"),
    CheckConstraint("(key_rate_limit IS NULL) = (key_rate_period IS NULL)", name="key_rate"),
)


# The starts of a partition key within the window of its queue's key rate, as a queue's
# row keeps its own (`queries/keys.py`); a row per key that started jobs lately.
key_starts = Table(
    "key_starts",
    metadata,
    Column("queue", Text, primary_key=True),
    Column("partition_key", Text, primary_key=True),
    *_window(default=False),
)


# A rated job type of a queue: its rate and the starts within its window, as a queue's
# row keeps its own (`queries/type_rates.py`).
type_rates = Table(
    "type_rates",
    metadata,
    Column("queue", Text, primary_key=True),
    Column("type", Text, primary_key=True),
    Column("rate_limit", Integer, nullable=False),
    Column("rate_period", Interval, nullable=False),
    *_window(default=True),
    *_rate_checks(),
)


def status_literal(status: Status) -> ColumnElement[str]:
    """`status` written into the SQL text, never bound: a partial index (`WHERE status =
    'pending'`) serves a statement only when its predicate visibly implies the index's,
    and the generic plan of a prepared statement cannot see through `status = $1`."""
    # Rendered into the statement when it is compiled (and cached with it), not at every
    # execution as a `literal_execute` bind would be: a status value needs no escaping.
    return literal_column(f"'{status.value}'", Text)


# The other tables' modules add them to `metadata`: imported last, for that alone.
from jobqueue.adapters.postgres import schema_workers  # noqa: E402, F401
