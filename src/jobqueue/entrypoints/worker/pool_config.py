"""What a worker pool is told: built from the settings in one place (`pool_config`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta

from jobqueue.adapters.results import DEFAULT_RESULT_MAX_BYTES
from jobqueue.domain.backoff import Backoff
from jobqueue.domain.fields import DEFAULT_QUEUE, check_queue_name
from jobqueue.domain.outcome import DEFAULT_MAX_SNOOZES
from jobqueue.entrypoints.config.settings import Settings


@dataclass(frozen=True, slots=True)
class PoolConfig:
    """What the pool is told. No defaults here: they are the settings' (`pool_config`
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
    # The largest result (JSON, in bytes) a job may keep; a larger one fails it.
    result_max_bytes: int = DEFAULT_RESULT_MAX_BYTES

    def __post_init__(self) -> None:
        check_queue_name(self.queue)
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1, got {self.workers}")
        for name in ("job_timeout", "lease_duration", "poll_interval", "outcome_timeout"):
            if getattr(self, name) <= timedelta(0):
                raise ValueError(f"{name} must be positive")
        if self.shutdown_timeout < timedelta(0):
            raise ValueError("shutdown_timeout cannot be negative")


def concurrency(settings: Settings) -> dict[str, int]:
    """Each queue the process consumes, and how many of its jobs run at once."""
    return {name: settings.workers if count is None else count for name, count in settings.queues}


def pool_configs(settings: Settings) -> list[PoolConfig]:
    """One pool per queue consumed, in the order QUEUES lists them."""
    return [
        replace(pool_config(settings), queue=name, workers=count)
        for name, count in concurrency(settings).items()
    ]


def pool_config(settings: Settings) -> PoolConfig:
    """What every pool is told but its queue and its concurrency (`pool_configs`)."""
    return PoolConfig(
        workers=settings.workers,
        job_timeout=settings.job_timeout,
        lease_duration=settings.lease_duration,
        poll_interval=settings.poll_interval,
        shutdown_timeout=settings.shutdown_timeout,
        outcome_timeout=settings.db_client_timeout,
        backoff=Backoff(settings.backoff_base, settings.backoff_max),
        max_snoozes=settings.max_snoozes,
        result_max_bytes=settings.result_max_bytes,
    )
