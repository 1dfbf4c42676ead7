"""The statements that put jobs in `jobs`, and those that explain an insert that met a key.

A submission's fields are the job's columns (`NewJob`), so the inserts are derived from
that one declaration: each field with a column of the same name is inserted as given,
typed by its column (`schema.jobs`); the two the store computes are written here,
`run_at` (the given instant, or `delay` after the statement's clock, or now) and
`unique_key` (with its period's slot, counted by the statement's clock). A new
submission field therefore needs its column, and nothing here.

Inserts use a targetless `ON CONFLICT DO NOTHING`: an Idempotency-Key or a unique key
may conflict, each with its own unique index; which one did is found out after, by
`FIND_REPLAY` and `FIND_UNIQUE_HOLDER`. Every insert reads back only the id and the
clock the job was stored at: the rest of a new job is a server default or the caller's
own value (`NewJob.stored`).
"""

from __future__ import annotations

from dataclasses import fields

from sqlalchemy.dialects import postgresql

from jobqueue.adapters.postgres.notify import CHANNEL
from jobqueue.adapters.postgres.queries.sql import quoted
from jobqueue.adapters.postgres.schema import jobs
from jobqueue.adapters.postgres.statement import Statement
from jobqueue.domain.job import NewJob

_DIALECT = postgresql.dialect()  # type: ignore[no-untyped-call]

# The wake-up workers LISTEN for, as the inserts that announce their own jobs send it.
ANNOUNCE = f"pg_notify({quoted(CHANNEL)}, '')"

# Submission fields that are no column: what the store computes a column from.
_INPUTS = {"delay": "interval", "unique_period": "interval"}
# Columns the store computes from the submission, as SQL over its fields (`{name}`).
_COMPUTED = {
    "run_at": "coalesce({run_at}, now() + {delay}, now())",
    "unique_key": (
        "CASE WHEN {unique_period} IS NULL THEN {unique_key}"
        " ELSE {unique_key} || '@'"
        " || floor(extract(epoch FROM now()) / extract(epoch FROM {unique_period}))::bigint::text"
        " END"
    ),
}
# What a submission says of itself, not of the job it becomes; and its dependencies,
# which only a graph's insert writes (`GRAPH_COLUMNS`).
_NOT_STORED = ("left_out", "depends_on", "run_anyway")
# What a graph's insert writes besides a plain one's (`adapters/postgres/graphs.py`): the
# dependencies given, and what the store decided of them.
GRAPH_COLUMNS = (
    "depends_on",
    "run_anyway",
    "workflow_id",
    "status",
    "waiting_for",
    "has_dependents",
    "wait_id",
)

SUBMITTED = tuple(field.name for field in fields(NewJob) if field.name not in _NOT_STORED)
STORED = tuple(name for name in SUBMITTED if name not in _INPUTS)


def sql_type(name: str) -> str:
    """The SQL type of submission field `name`: its column's, or its input's."""
    if name in _INPUTS:
        return _INPUTS[name]
    return str(jobs.c[name].type.compile(dialect=_DIALECT)).lower()


def _value(name: str, each: dict[str, str]) -> str:
    """Column `name`'s value, given each field's SQL (`each`)."""
    computed = _COMPUTED.get(name)
    return each[name] if computed is None else computed.format_map(each)


def _announcing(insert: str) -> str:
    """`insert`'s rows, plus one NOTIFY for the statement: an uncorrelated scalar subquery
    runs once, and only when there is a row to return. PostgreSQL delivers it at commit,
    never for a rollback, and folds a transaction's identical notifications into one."""
    return f"""
    WITH inserted AS ({insert})
    SELECT inserted.*, (SELECT {ANNOUNCE}) AS announced FROM inserted
    """


def _given_values() -> str:
    parameters = {name: f"CAST(:{name} AS {sql_type(name)})" for name in SUBMITTED}
    return ",\n        ".join(_value(name, parameters) for name in STORED)


def _insert_one() -> str:
    return f"""
    INSERT INTO jobs ({", ".join(STORED)})
    VALUES (
        {_given_values()}
    )
    ON CONFLICT DO NOTHING
    RETURNING id, created_at
    """


def insert_one_if(source: str) -> str:
    """An insert of one job with the id `:id`, made only if `source` (a CTE) has a row."""
    return f"""
    INSERT INTO jobs (id, {", ".join(STORED)})
    SELECT
        CAST(:id AS uuid),
        {_given_values()}
    FROM {source}
    ON CONFLICT DO NOTHING
    RETURNING id, created_at
    """


# Many jobs: one row per element of parallel arrays (`each_<field>`), the ids made by the
# client, so that each returned row is matched to its submission whatever order the
# server returns them in. An array of arrays cannot be unnested by row, so each job's
# `unique_states` travel joined by commas; a `jsonb[]` of Python values is not what the
# driver encodes, so payloads travel as JSON text, cast by the server.
def _travels_as(name: str) -> str:
    kind = sql_type(name)
    return "text" if kind == "jsonb" or kind.endswith("[]") else kind


def _arrived(name: str) -> str:
    kind = sql_type(name)
    if kind == "jsonb":
        return f"CAST(submitted.{name} AS jsonb)"
    if kind.endswith("[]"):
        return f"CAST(string_to_array(submitted.{name}, ',') AS {kind})"
    return f"submitted.{name}"


def _insert_many(extra: tuple[str, ...] = ()) -> str:
    """Many jobs, and for a graph's the `extra` columns, each from an array of its own."""
    arrived = {name: _arrived(name) for name in (*SUBMITTED, *extra)}
    values = ",\n        ".join(_value(name, arrived) for name in (*STORED, *extra))
    arrays = ",\n        ".join(
        f"CAST(:each_{name} AS {_travels_as(name)}[])" for name in ("id", *SUBMITTED, *extra)
    )
    return f"""
    INSERT INTO jobs (id, {", ".join((*STORED, *extra))})
    SELECT
        submitted.id,
        {values}
    FROM unnest(
        {arrays}
    ) AS submitted (id, {", ".join((*SUBMITTED, *extra))})
    ON CONFLICT DO NOTHING
    RETURNING id, created_at
    """


INSERT_JOB = Statement("insert_job", _insert_one())
INSERT_JOB_ANNOUNCED = Statement("insert_job_announced", _announcing(_insert_one()))
INSERT_JOBS = Statement("insert_jobs", _insert_many())
INSERT_JOBS_ANNOUNCED = Statement("insert_jobs_announced", _announcing(_insert_many()))
INSERT_GRAPH = Statement("insert_graph", _insert_many(GRAPH_COLUMNS))
INSERT_GRAPH_ANNOUNCED = Statement(
    "insert_graph_announced", _announcing(_insert_many(GRAPH_COLUMNS))
)

# The clock a COPY's jobs are stored at, read first: in the caller's transaction, this is
# the statement that opens it (SQLAlchemy begins on its first execute, not on a COPY
# sent on the driver). Its NOTIFY is delivered, like an insert's, at commit only.
CLOCK = Statement("clock", "SELECT now()")
CLOCK_ANNOUNCED = Statement("clock_announced", f"SELECT now(), {ANNOUNCE}")

# The job an Idempotency-Key replays, and whether the submission is the same request:
# payloads compared as jsonb, so key order and whitespace do not make two equal requests
# differ.
FIND_REPLAY = Statement(
    "find_replay",
    """
    SELECT jobs.*,
        (type = :type AND payload = CAST(:payload AS jsonb) AND max_attempts = :max_attempts)
            AS same_request
    FROM jobs
    WHERE idempotency_key = :idempotency_key
    """,
)

# The job holding a unique key in one of the statuses the key counts in.
FIND_UNIQUE_HOLDER = Statement(
    "find_unique_holder",
    f"""
    SELECT * FROM jobs
    WHERE unique_key = {
        _COMPUTED["unique_key"].format(
            unique_key="CAST(:unique_key AS text)",
            unique_period="CAST(:unique_period AS interval)",
        )
    }
      AND status = ANY(unique_states)
    """,
)
