"""Jobs without keys written by one binary COPY (asyncpg's `copy_records_to_table`), on the
driver connection under the caller's: about a third of the server's time of an INSERT,
and half the client's, since nothing is read back. The jobs returned are the domain's
own `NewJob.stored(id, now)`, `now` read first (`CLOCK`, which also opens the caller's
transaction and, announcing, sends the wake-up at commit); their ids are made here,
time-ordered (`ids.py`)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import fields
from datetime import datetime
from operator import attrgetter
from typing import Any
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from jobqueue.adapters.postgres.driver import driver_of
from jobqueue.adapters.postgres.failures import refused_values, store_failures
from jobqueue.adapters.postgres.ids import time_ordered_ids
from jobqueue.adapters.postgres.queries.inserts import CLOCK, CLOCK_ANNOUNCED, SUBMITTED
from jobqueue.adapters.postgres.schema import jobs
from jobqueue.domain.errors import InvalidJob
from jobqueue.domain.fields import JsonValue
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.ports import Submitted
from jobqueue.domain.status import Status

_JOB_FIELDS = tuple(field.name for field in fields(Job))

# In the caller's transaction, COPY writes only what the submissions hold (and their ids):
# every other column of a new job is the server's default, which is what `NewJob.stored`
# gives (pending, no attempt, never leased, stamped `now()`: the transaction's clock, read
# first, and due then unless scheduled, a delay counting from that clock). A column whose
# every value is its default is left out as well. Half
# the columns to encode and send cuts the client's and the server's time per row alike
# (measured: 67k -> 100k rows/s for COPY alone). Outside a transaction (an autocommit
# connection), the clock read is a statement of its own, so every column is sent with the
# values read, and what the caller is returned is still exactly what was written.
# Written by claims and endings, never by a submission: NULL in every new row.
_CLAIMED_ONLY = ("started_at", "worker", "attempt_log")
# Only unique jobs set these, and those are never copied (a COPY cannot meet a conflict).
_UNIQUE_ONLY = ("unique_key", "unique_states")
_COPIED = tuple(
    name for name in _JOB_FIELDS if name not in ("payload", "status", *_CLAIMED_ONLY, *_UNIQUE_ONLY)
)
_COPY_COLUMNS = ("payload", "status", *_COPIED)
_copied_values = attrgetter(*_COPIED)


async def copy_jobs(
    connection: AsyncConnection, news: Sequence[NewJob], announce: bool
) -> list[Submitted]:
    with store_failures(), refused_values():
        clock = await connection.execute((CLOCK_ANNOUNCED if announce else CLOCK).clause)
        now = clock.scalar_one()
        ids = time_ordered_ids(len(news))
        async with driver_of(connection) as driver:
            if not driver.is_in_transaction():
                stored = [new.stored(job_id, now) for job_id, new in zip(ids, news, strict=True)]
                await driver.copy_records_to_table(
                    jobs.name, records=_every_column(stored), columns=_COPY_COLUMNS
                )
                return [Submitted(job, replayed=False) for job in stored]
            columns, records = _submitted_records(ids, news, now)
            # The server writes the rows while this process builds the jobs it returns
            # (a seventh of a bulk call's client time, measured), rather than after.
            copying = asyncio.ensure_future(
                driver.copy_records_to_table(jobs.name, records=records, columns=columns)
            )
            try:
                submitted = await _stored_meanwhile(ids, news, now)
            except BaseException:
                # Cancelled: so is the COPY, before the connection is given up.
                copying.cancel()
                await asyncio.gather(copying, return_exceptions=True)
                raise
            await copying
            return submitted


# Jobs built between two turns of the event loop while a COPY is on its way: the first
# turn lets it send its statement, a later one its rows once the server is ready for them.
_BUILT_PER_TURN = 200


async def _stored_meanwhile(
    ids: Sequence[UUID], news: Sequence[NewJob], now: datetime
) -> list[Submitted]:
    submitted: list[Submitted] = []
    for start in range(0, len(news), _BUILT_PER_TURN):
        await asyncio.sleep(0)
        end = start + _BUILT_PER_TURN
        submitted += [
            Submitted(new.stored(job_id, now), replayed=False)
            for job_id, new in zip(ids[start:end], news[start:end], strict=True)
        ]
    return submitted


# The submission's fields a COPY in a transaction sends only when some job of the call
# does not leave them at their default (`NewJob`'s, which is the column's server default):
# every stored field but those always sent, those computed (`run_at` from `run_at` and
# `delay`), and the payload (a dict, compared apart). A keyless call has no unique key.
_ALWAYS = ("type", "max_attempts")
_COMPUTED = ("run_at", "delay", "unique_key", "unique_states", "unique_period")
_DEFAULTED = tuple(name for name in SUBMITTED if name not in (*_ALWAYS, *_COMPUTED, "payload"))
_DEFAULTS = tuple(NewJob.__dataclass_fields__[name].default for name in _DEFAULTED)
_defaulted = attrgetter(*_DEFAULTED)


def _submitted_records(
    ids: Sequence[UUID], news: Sequence[NewJob], now: datetime
) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
    # Built column by column, then zipped into rows.
    columns: dict[str, Sequence[Any]] = {"id": ids}
    columns |= {name: [getattr(new, name) for new in news] for name in _ALWAYS}
    if any(type(new.payload) is not dict or new.payload for new in news):
        columns["payload"] = [json_text(new.payload) for new in news]
    if any(new.run_at is not None or new.delay for new in news):
        columns["run_at"] = [new.due_at(now) for new in news]
    # One pass over the jobs for all the rarely set fields: most calls leave them all at
    # their defaults, and then the set holds one tuple.
    seen = {_defaulted(new) for new in news}
    for index, name in enumerate(_DEFAULTED):
        if any(values[index] != _DEFAULTS[index] for values in seen):
            columns[name] = [getattr(new, name) for new in news]
    return tuple(columns), list(zip(*columns.values(), strict=True))


def _every_column(stored: Sequence[Job]) -> list[tuple[Any, ...]]:
    pending = Status.PENDING.value
    return [(json_text(job.payload), pending, *_copied_values(job)) for job in stored]


# `json`, not msgspec (5x faster): msgspec writes NaN as null, changing the data of a
# NewJob made without `build`. NaN is refused here, a lone surrogate by the server
# (escaped by `ensure_ascii`), as the SQLAlchemy path refuses them. One encoder, made
# once: `json.dumps` with arguments makes a new one per call, at twice the cost.
_encode_json = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def json_text(payload: JsonValue) -> str:
    try:
        return _encode_json(payload)
    except ValueError as error:
        raise InvalidJob(f"the job store refused the job: payload is not JSON ({error})") from None
