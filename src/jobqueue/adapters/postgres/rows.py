"""Rows of `jobs` into domain `Job`s: the one place the store's columns meet the domain.

A `Job` field is the column of the same name, so a new field needs its column and
nothing here, unless its column holds JSON the domain reads as a type of its own (the
attempt log, progress).
"""

from __future__ import annotations

import json
from dataclasses import fields
from datetime import UTC, datetime
from typing import Any, Protocol

from jobqueue.domain.attempts import AttemptRecord, Outcome
from jobqueue.domain.job import Job
from jobqueue.domain.progress import Progress
from jobqueue.domain.status import Status

_FIELDS = tuple(field.name for field in fields(Job))
_STATUSES = {status.value: status for status in Status}


class Row(Protocol):
    """A row by column name: SQLAlchemy's `RowMapping`, or asyncpg's `Record`."""

    def __getitem__(self, name: str, /) -> Any: ...


def job_from_row(row: Row) -> Job:
    values = {name: row[name] for name in _FIELDS}
    values["status"] = _STATUSES[values["status"]]
    log = values["attempt_log"]
    values["attempt_log"] = () if log is None else tuple(_attempt(entry) for entry in log)
    for name in ("unique_states", "depends_on"):
        if values[name] is not None:
            values[name] = tuple(values[name])
    progress = values["progress"]
    if progress is not None:
        values["progress"] = _progress(progress)
    return Job(**values)


def progress_text(progress: Progress) -> str:
    """A progress report as its column holds it, but for `at`, which the statement
    writing it adds (`queries/sql.stamped`)."""
    return json.dumps(progress.as_json(), separators=(",", ":"))


def _progress(entry: dict[str, Any]) -> Progress:
    # `progress_text`, and the store's time, `at`.
    return Progress(
        fraction=entry.get("fraction"),
        done=entry.get("done"),
        total=entry.get("total"),
        message=entry.get("message"),
        at=_instant(entry.get("at")),
    )


def _attempt(entry: dict[str, Any]) -> AttemptRecord:
    # Written by `attempt_log.logged`: times as JSON strings, in the session's time zone.
    return AttemptRecord(
        attempt=entry["attempt"],
        outcome=Outcome(entry["outcome"]),
        error=entry["error"],
        started_at=_instant(entry["started_at"]),
        finished_at=_instant(entry["finished_at"]),
        worker=entry["worker"],
    )


def _instant(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text).astimezone(UTC)
