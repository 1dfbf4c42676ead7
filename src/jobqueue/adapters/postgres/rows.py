"""Rows of `jobs` into domain `Job`s: the one place the store's columns meet the domain.

A `Job` field is the column of the same name, so a new field needs its column and
nothing here.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Protocol

from jobqueue.domain.job import Job
from jobqueue.domain.status import Status

_FIELDS = tuple(field.name for field in fields(Job))
_STATUSES = {status.value: status for status in Status}


class Row(Protocol):
    """A row by column name: SQLAlchemy's `RowMapping`, or asyncpg's `Record`."""

    def __getitem__(self, name: str, /) -> Any: ...


def job_from_row(row: Row) -> Job:
    values = {name: row[name] for name in _FIELDS}
    values["status"] = _STATUSES[values["status"]]
    return Job(**values)
