"""The in-memory store's rows as PostgreSQL writes and hands them out: an ended attempt
appended to the log, progress stamped with its time, copies detached from what the store
holds, a listing's row without its result."""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import datetime

from jobqueue.domain.attempts import AttemptRecord, Outcome, appended
from jobqueue.domain.job import Job
from jobqueue.domain.progress import Progress


def _logged(
    job: Job, outcome: Outcome, error: str | None, finished_at: datetime
) -> tuple[AttemptRecord, ...]:
    ended = AttemptRecord(job.attempts, outcome, error, job.started_at, finished_at, job.worker)
    return appended(job.attempt_log, ended)


def _at(progress: Progress, now: datetime) -> Progress:
    return replace(progress, at=now)


def _detached(job: Job) -> Job:
    # Every job handed out carries its own payload, as rows read from a database do, so a
    # caller mutating it cannot change what the store holds.
    return replace(job, payload=copy.deepcopy(job.payload))


def _listed(job: Job) -> Job:
    # A page leaves results out, as the store's listings do (`queries/sql.listed`).
    return replace(_detached(job), result=None)
