"""A job as the store holds it, and the proof of one claim of it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from jobqueue.domain.attempts import AttemptRecord, latest_attempt
from jobqueue.domain.fields import DEFAULT_PRIORITY, DEFAULT_QUEUE, JsonValue
from jobqueue.domain.status import TRAITS, Phase, Status


@dataclass(frozen=True, slots=True)
class Lease:
    """Proof of one claim. Outcome writes are fenced by the token, which grows at every
    claim; attempt numbers cannot fence because an operator's retry or a release repeats
    them."""

    job_id: UUID
    token: int


@dataclass(frozen=True, slots=True)
class Job:
    id: UUID
    type: str
    payload: JsonValue
    status: Status
    attempts: int
    max_attempts: int
    run_at: datetime
    locked_until: datetime | None
    lease_token: int
    last_error: str | None
    idempotency_key: str | None
    created_at: datetime
    updated_at: datetime
    traceparent: str | None = None
    queue: str = DEFAULT_QUEUE
    priority: int = DEFAULT_PRIORITY
    # When its latest attempt was claimed, and by which process (host:pid).
    started_at: datetime | None = None
    worker: str | None = None
    # The endings of the earlier attempts it outlived (`attempts.py`), oldest first.
    attempt_log: tuple[AttemptRecord, ...] = ()
    # Snoozes since the job was submitted or an operator retried it (`outcome.Snooze`).
    snoozes: int = 0
    # Its unique key (`domain/unique.py`; with the period's slot), and the statuses in
    # which no other job may hold it; None for a job that is not unique.
    unique_key: str | None = None
    unique_states: tuple[str, ...] | None = None
    # How long one attempt may run; None: the worker's JOB_TIMEOUT.
    timeout: timedelta | None = None

    @property
    def lease(self) -> Lease:
        return Lease(self.id, self.lease_token)

    @property
    def finished_at(self) -> datetime | None:
        """When it ended (finished or held): such a row is never written again, so its
        `updated_at` is that moment. None while it is live."""
        return None if TRAITS[self.status].phase is Phase.LIVE else self.updated_at

    @property
    def history(self) -> tuple[AttemptRecord, ...]:
        """Every attempt kept, oldest first: the log, then the one it still holds."""
        latest = latest_attempt(
            self.status,
            self.attempts,
            self.last_error,
            self.started_at,
            self.updated_at,
            self.worker,
        )
        return self.attempt_log if latest is None else (*self.attempt_log, latest)

    @property
    def is_last_attempt(self) -> bool:
        return self.attempts >= self.max_attempts
