"""The attempt log in SQL: the ending of the attempt a row holds, appended to the row's
`attempt_log` by the statement that ends it (`domain/attempts.py` says which do)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, case, func, literal_column, type_coerce
from sqlalchemy.dialects.postgresql import JSONB

from jobqueue.adapters.postgres.schema import jobs
from jobqueue.domain.attempts import LOGGED_ATTEMPTS

_EMPTY = literal_column("'[]'::jsonb", JSONB)


def _key(name: str) -> ColumnElement[str]:
    # Inlined: a bound key would be one more parameter per entry, for a constant.
    return literal_column(f"'{name}'")


def logged(
    outcome: ColumnElement[Any], error: ColumnElement[Any], finished_at: ColumnElement[Any]
) -> ColumnElement[Any]:
    """`attempt_log` with the row's current attempt (`attempts`, `started_at`, `worker`)
    appended as ending in `outcome` at `finished_at`, the oldest entry dropped past
    `LOGGED_ATTEMPTS` (one at a time: each statement appends one)."""
    entry = func.jsonb_build_object(
        _key("attempt"),
        jobs.c.attempts,
        _key("outcome"),
        outcome,
        _key("error"),
        error,
        _key("started_at"),
        jobs.c.started_at,
        _key("finished_at"),
        finished_at,
        _key("worker"),
        jobs.c.worker,
    )
    log = type_coerce(
        func.coalesce(jobs.c.attempt_log, _EMPTY).op("||")(func.jsonb_build_array(entry)), JSONB
    )
    over = func.jsonb_array_length(log) > LOGGED_ATTEMPTS
    return case((over, log.op("-")(literal_column("0"))), else_=log)
