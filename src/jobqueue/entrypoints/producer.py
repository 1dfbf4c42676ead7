"""The way in of an in-process producer: `jobqueue.enqueue` and `jobqueue.enqueue_many`;
and its wait for a job's end, `jobqueue.wait`.

They store jobs in the caller's own connection and transaction (or on their own, given an
engine), resolved exactly as `POST /jobs` resolves them (`domain/new_job.resolve`): what
a submission leaves out comes from its type's handler options in the workers' `registry`
(when given), then the MAX_ATTEMPTS setting, read from this process's environment as
the service reads it. The statements and their announcing are the adapter's
(`adapters/postgres/enqueue.py`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from datetime import timedelta
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from jobqueue.adapters.postgres import enqueue as inserting
from jobqueue.adapters.postgres.endings import MAX_WAIT
from jobqueue.adapters.postgres.engine_waits import waits_of
from jobqueue.adapters.postgres.pooler import Pooler
from jobqueue.domain.dependencies import Step
from jobqueue.domain.errors import NotEnded
from jobqueue.domain.fields import DEFAULT_MAX_ATTEMPTS
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.ports import Submitted
from jobqueue.domain.registry import Registry
from jobqueue.domain.status import LIVE
from jobqueue.entrypoints.config.rules import ConfigError, check
from jobqueue.entrypoints.config.settings import SETTINGS, VARIABLES, defaults


async def enqueue(
    connection: AsyncConnection | AsyncEngine,
    new: NewJob,
    *,
    announce: bool = True,
    registry: Registry | None = None,
) -> Submitted:
    """Submit `new` inside the caller's connection and transaction, or on its own.

    Given the `registry` of the workers' handlers, `new` is first checked as `POST /jobs`
    checks a submission: `UnknownJobType` for a type it has no handler for,
    `InvalidPayload` for a payload its declared payload type does not fit (both
    `InvalidJob`, the errors HTTP answers with 400), before anything is sent. What `new`
    leaves out (queue, priority, max_attempts, timeout, unique) is taken from its type's
    handler options in `registry`, then the attempt budget from MAX_ATTEMPTS: the job is
    stored as `POST /jobs` would store it.

    Given a connection, the job is enqueued atomically with your own writes: it exists if
    and only if the caller's transaction commits, and idle workers are told when it does
    (`announce=False` leaves the wake-up out, for producers committing thousands of
    single-job transactions a second: workers then find the jobs at their next poll).
    Given an engine, the job is committed at once by one statement on a pooled
    connection (one round trip), and idle workers are told through a wake-up coalesced
    per engine (at most one NOTIFY per 2 ms).

    Duplicate Idempotency-Keys are safe under concurrency: the unique index decides the
    winner, the others read the winner's job back. A unique job whose key is held is
    answered with the job holding it (`duplicate`). Raises `InvalidJob` for a value
    PostgreSQL refuses, `IdempotencyConflict` for a key used by a different request,
    `StoreUnavailable` when the database fails, `ConfigError` for a MAX_ATTEMPTS that is
    no budget.
    """
    return await inserting.enqueue(
        connection,
        new,
        announce=announce,
        registry=registry,
        default_max_attempts=max_attempts_from(os.environ),
    )


async def enqueue_many(
    connection: AsyncConnection | AsyncEngine,
    news: Sequence[NewJob],
    *,
    announce: bool = True,
    registry: Registry | None = None,
) -> list[Submitted]:
    """Submit every job of `news` inside the caller's connection and transaction, or on
    its own (one transaction); return their `Submitted`, in the order given.

    Like `enqueue`, job for job: checked by `registry` first when given (one that fails
    fails the call, before any is sent), resolved as `enqueue` resolves it; all or none
    exist once the transaction ends, and idle workers are told once. A job whose
    Idempotency-Key is taken is answered with the job holding it (`replayed`), or
    refused with `IdempotencyConflict` when that job is a different request (which fails
    the whole call: the caller's transaction should then roll back). The returned jobs
    carry the caller's payload objects as given.

    Jobs without an Idempotency-Key or a unique key are written by COPY, a third of the
    server's time of an INSERT; a call where any job has a key is one INSERT per 10,000
    jobs instead, since only an INSERT can meet a conflict.
    """
    return await inserting.enqueue_many(
        connection,
        news,
        announce=announce,
        registry=registry,
        default_max_attempts=max_attempts_from(os.environ),
    )


async def enqueue_graph(
    connection: AsyncConnection | AsyncEngine,
    steps: Sequence[Step],
    *,
    announce: bool = True,
    registry: Registry | None = None,
) -> list[Submitted]:
    """Submit a graph: jobs that wait for each other (a `Step` names its job, and the
    steps, by name or place, or stored jobs, by id, it waits for: `after`), all stored
    in the caller's transaction (or in one of their own), or none.

    Checked and resolved job by job as by `enqueue`. A job waits (status `waiting`) until
    every job it depends on completed, and is cancelled when one of them ends otherwise,
    unless it runs anyway (`NewJob.build(run_anyway=True)`). The graph is a workflow: it
    joins the workflow of the first stored job it depends on that has one, else it starts
    one. Raises `DependencyCycle`, `UnknownDependency`, `DependencyEnded` (a stored
    dependency that will never complete) or `DependencyError`, all `InvalidJob`, before
    anything is stored. The stored jobs it depends on stay locked until the transaction
    ends: their endings wait for it, so keep it short.
    """
    return await inserting.enqueue_graph(
        connection,
        steps,
        announce=announce,
        registry=registry,
        default_max_attempts=max_attempts_from(os.environ),
    )


# The timeout bounds the wait itself and is answered by NotEnded, not a cancellation.
async def wait(engine: AsyncEngine, job_id: UUID, *, timeout: float | None = 60.0) -> Job:  # noqa: ASYNC109
    """The job once it has ended (finished, or dead-lettered): its `result`, `status`,
    `last_error`. Woken by the database's notification as it ends, not by polling; raises
    `NotEnded` (a `TimeoutError`) when `timeout` seconds pass first (None: as long as it
    takes), `JobNotFound` for a job that does not exist or was deleted meanwhile.

    The first wait on `engine` opens one connection of its own to listen on; it is
    closed once no wait has been in progress for 30 seconds. With DATABASE_POOLER=
    pgbouncer or NOTIFY=false in this process's environment (as the service reads them)
    nothing can listen: waits read their job every second instead.
    """
    if timeout is not None and timeout < 0:
        raise ValueError(f"a wait's timeout cannot be negative, got {timeout}")
    waits = waits_of(engine, listen=listens_from(os.environ))
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    while True:
        left = MAX_WAIT if deadline is None else timedelta(seconds=max(deadline - loop.time(), 0))
        job = await waits.wait(job_id, min(left, MAX_WAIT))
        if job.status not in LIVE:
            return job
        if deadline is not None and loop.time() >= deadline:
            raise NotEnded(job.id, job.status, timeout or 0.0)


def listens_from(environ: Mapping[str, str]) -> bool:
    """Whether an in-process producer's waits can LISTEN, from its own environment: not
    through PgBouncer (DATABASE_POOLER), nor with NOTIFY=false."""
    pooler = _setting_from(environ, "database_pooler")
    return _setting_from(environ, "notify") is True and pooler is Pooler.NONE


def max_attempts_from(environ: Mapping[str, str]) -> int:
    """The MAX_ATTEMPTS setting alone, as an in-process producer reads it from its own
    environment (`entrypoints/producer.py`); raises `ConfigError` for a bad value."""
    if not environ.get(_variable("max_attempts"), "").strip():
        # Unset, the common case, read at every enqueue: no parse, no check.
        return DEFAULT_MAX_ATTEMPTS
    value = _setting_from(environ, "max_attempts")
    # Every other setting at its default, which passes: only this one's problems show.
    values = {**defaults(), "max_attempts": value}
    problems = check(values, skip=frozenset(), variables=VARIABLES)
    if problems:
        raise ConfigError(problems)
    assert isinstance(value, int)
    return value


def _variable(attribute: str) -> str:
    return VARIABLES[attribute]


def _setting_from(environ: Mapping[str, str], attribute: str) -> object:
    """One setting as this process's environment gives it, parsed as the service parses
    it; its default when unset. Raises `ConfigError` for a bad value."""
    row = next(row for row in SETTINGS if row.attribute == attribute)
    raw = environ.get(row.env, "").strip()
    if not raw:
        return defaults()[attribute]
    try:
        return row.parse(raw)
    except ValueError as error:
        raise ConfigError([f"{row.env}: {error}"]) from None
