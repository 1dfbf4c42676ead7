"""What a worker pool is told: built from the settings in one place (`Settings.pool_config`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from jobqueue.domain.backoff import Backoff
from jobqueue.domain.fields import DEFAULT_QUEUE, check_queue_name
from jobqueue.domain.outcome import DEFAULT_MAX_SNOOZES


@dataclass(frozen=True, slots=True)
class PoolConfig:
    """What the pool is told. No defaults here: they are the settings' (`Settings.pool_config`
    builds this), so a default is declared once."""

    workers: int
    job_timeout: timedelta
    lease_duration: timedelta
    poll_interval: timedelta
    shutdown_timeout: timedelta
    # Bounds each outcome write, so a store that stopped answering cannot hold up shutdown.
    outcome_timeout: timedelta
    backoff: Backoff
    # How often a job may snooze before each snooze uses up an attempt.
    max_snoozes: int = DEFAULT_MAX_SNOOZES
    # The queue the pool claims from; a process runs one pool per queue it consumes.
    queue: str = DEFAULT_QUEUE

    def __post_init__(self) -> None:
        check_queue_name(self.queue)
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1, got {self.workers}")
        for name in ("job_timeout", "lease_duration", "poll_interval", "outcome_timeout"):
            if getattr(self, name) <= timedelta(0):
                raise ValueError(f"{name} must be positive")
        if self.shutdown_timeout < timedelta(0):
            raise ValueError("shutdown_timeout cannot be negative")
