"""Cancelling jobs on PostgreSQL: one statement ends the job, and tells its process.

A cancel is the write that ends the job, pending or running: it sets `cancelled` and
clears the lease in one compare-and-swap. A running attempt is thereby fenced out like
a stale one (every outcome write and renewal requires its lease), so nothing its handler
does later (a late return, an error) is written over the cancellation. The same statement
notifies `CANCELS_CHANNEL` with the job's id for each job it took from a running attempt;
the process running it hears at commit and stops the handler, and a process that missed
the notification finds out at its next lease renewal.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Text, case, cast, func, literal_column, select, update
from sqlalchemy.sql import Select

from jobqueue.adapters.postgres.attempt_log import logged
from jobqueue.adapters.postgres.schema import jobs
from jobqueue.adapters.postgres.schema import status_literal as _status
from jobqueue.domain.attempts import CANCELLED
from jobqueue.domain.status import Status

# Never built from anything a client sent; the payload is a job id.
CANCELS_CHANNEL = "jobqueue_cancels"

# Typed: an untyped NULL argument of jsonb_build_object is refused.
_NO_ERROR = literal_column("NULL::text", Text)


def cancelling(target: Any, *, whole: bool = True) -> Select[Any]:
    """The cancel of the rows of `target` (a CTE of `id`, and `was`: each row's status,
    read under the row's lock), returning each job as it now is and `was`, or (not
    `whole`) only each job's id: a bulk cancel counts them.

    The attempt a running job loses is logged, ended as cancelled: the job outlives it
    in the sense that it is never written again by it. A pending job's previous attempt,
    if any, is in the log already."""
    running = target.c.was == _status(Status.PROCESSING)
    ended = (
        update(jobs)
        .where(jobs.c.id == target.c.id)
        .values(
            status=_status(Status.CANCELLED),
            attempt_log=case(
                (running, logged(literal_column(f"'{CANCELLED}'", Text), _NO_ERROR, func.now())),
                else_=jobs.c.attempt_log,
            ),
            locked_until=None,
            updated_at=func.now(),
        )
        .returning(*(jobs.c if whole else (jobs.c.id,)), target.c.was)
        .cte("cancelled")
    )
    announced = case(
        (
            ended.c.was == _status(Status.PROCESSING),
            func.pg_notify(CANCELS_CHANNEL, cast(ended.c.id, Text)),
        ),
    )
    return select(ended, announced.label("announced"))
