"""Settings of the worker pools: the pool configuration they carry, and QUEUES."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobqueue.domain.backoff import Backoff
from jobqueue.entrypoints.config.rules import ConfigError
from jobqueue.entrypoints.config.settings import Settings
from jobqueue.entrypoints.worker.pool_config import pool_config, pool_configs


def test_pool_config_carries_the_worker_settings() -> None:
    settings = Settings.from_env(
        {
            "WORKERS": "3",
            "JOB_TIMEOUT": "7s",
            "LEASE_DURATION": "13s",
            "POLL_INTERVAL": "100ms",
            "SHUTDOWN_TIMEOUT": "9s",
            "BACKOFF_BASE": "2s",
            "BACKOFF_MAX": "1m",
        }
    )

    config = pool_config(settings)

    assert config.workers == 3
    assert config.job_timeout == timedelta(seconds=7)
    assert config.lease_duration == timedelta(seconds=13)
    assert config.poll_interval == timedelta(milliseconds=100)
    assert config.shutdown_timeout == timedelta(seconds=9)
    assert config.backoff == Backoff(timedelta(seconds=2), timedelta(minutes=1))
    # Each outcome write is bounded like every other statement of the service.
    assert config.outcome_timeout == settings.db_client_timeout


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("default=x", "QUEUES: 'default=x': the number of jobs run at once must be a whole number"),
        ("default=0", "QUEUES: each queue's number of jobs run at once must be between 1 and"),
        ("a,b,a=2", "QUEUES: queue 'a' is listed twice"),
        (" , ", "QUEUES: names no queue; use a form such as 'default=10,emails=2'"),
        ("no spaces=1", "QUEUES: queue name must be 1 to 64 letters, digits or '_.:-'"),
        ("a=6000,b=6000", "QUEUES: more than 10000 jobs at once in all, over every queue"),
    ],
)
def test_queues_refusals_say_what_to_change(raw: str, problem: str) -> None:
    with pytest.raises(ConfigError) as refused:
        Settings.from_env({"QUEUES": raw})
    assert [p for p in refused.value.problems if p.startswith(problem)], refused.value.problems


def test_without_queues_a_process_consumes_the_default_queue_with_workers() -> None:
    settings = Settings.from_env({"WORKERS": "6"})
    assert [(c.queue, c.workers) for c in pool_configs(settings)] == [("default", 6)]
