"""Rows of `jobs` into domain `Job`s: the one place the store's columns meet the domain.

A `Job` field is the column of the same name, so a new field needs its column and
nothing here.
"""

from __future__ import annotations

from dataclasses import fields

from sqlalchemy import RowMapping

from jobqueue.domain.job import Job
from jobqueue.domain.status import Status

_FIELDS = tuple(field.name for field in fields(Job))


def job_from_row(row: RowMapping) -> Job:
    values = {name: row[name] for name in _FIELDS}
    values["status"] = Status(values["status"])
    return Job(**values)
