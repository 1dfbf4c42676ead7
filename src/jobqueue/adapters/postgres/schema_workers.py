"""The tables worker processes keep of themselves, in the schema's metadata: the live
processes, the job types they published, periodic slots, and the dashboard's rollup."""

from __future__ import annotations

from sqlalchemy import ARRAY, BigInteger, Column, DateTime, Double, Integer, Table, Text, text
from sqlalchemy.dialects.postgresql import JSONB, UUID

from jobqueue.adapters.postgres.schema import metadata
from jobqueue.domain.throughput import PICKUP_BOUNDS_MS

# The live worker processes, a row each, refreshed with their heartbeats and gone once
# `expires_at` passes (`adapters/postgres/processes.py`).
processes = Table(
    "processes",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("host", Text, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("version", Text, nullable=False),
    Column("queues", ARRAY(Text), nullable=False),
    Column("types", ARRAY(Text), nullable=False),
    Column("concurrency", Integer, nullable=False),
    # Each queue's share of it, in `queues`' order; NULL from a process of an earlier version.
    Column("queue_concurrency", ARRAY(Integer), nullable=True),
    Column("running", Integer, nullable=False),
    Column("started_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    Column("heartbeat_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    Column("expires_at", DateTime(timezone=True), nullable=False),
)


# What workers published about the job types they run (`adapters/postgres/job_types.py`),
# so that an API process without their code can check submissions.
job_types = Table(
    "job_types",
    metadata,
    Column("name", Text, primary_key=True),
    # A JSON Schema; NULL: the type takes any JSON payload.
    Column("payload_schema", JSONB, nullable=True),
    Column("options", JSONB, nullable=False),
    Column("description", Text, nullable=True),
    Column("published_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    Column("published_by", Text, nullable=False),
)


# The last slot each periodic job ran (`adapters/postgres/queries/periodic.py`): advanced
# by the statement that inserts the slot's job, so a slot runs at most once, ever.
periodic_slots = Table(
    "periodic_slots",
    metadata,
    Column("name", Text, primary_key=True),
    Column("last_slot", DateTime(timezone=True), nullable=False),
    Column("last_job_id", UUID(as_uuid=True), nullable=True),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
)


# The pickup latency buckets' columns, one per bound of `PICKUP_BOUNDS_MS` (latencies up
# to it and above the bound before), then one for the rest: plain columns rather than an
# array so that a day's chart sums them in SQL, and a flush adds to them by name.
PICKUP_COLUMNS: tuple[str, ...] = (
    *(f"pickup_{bound}ms" for bound in PICKUP_BOUNDS_MS),
    "pickup_over",
)
# The counters of a rollup row, in the order `RollupCounts` holds them.
ROLLUP_COUNTERS: tuple[str, ...] = ("completed", "failed", "retried", "picked")


def _counter(name: str) -> Column[int]:
    return Column(name, BigInteger, nullable=False, server_default=text("0"))


# The dashboard's throughput and pickup latency, a row per (minute, queue) that each
# worker process adds its counts to every few seconds (`domain/throughput.py`). The key
# leads with the minute: a chart reads one range of it, retention deletes another.
job_rollup = Table(
    "job_rollup",
    metadata,
    Column("minute", DateTime(timezone=True), primary_key=True),
    Column("queue", Text, primary_key=True),
    *(_counter(name) for name in ROLLUP_COUNTERS),
    Column("pickup_seconds", Double, nullable=False, server_default=text("0")),
    *(_counter(name) for name in PICKUP_COLUMNS),
)
