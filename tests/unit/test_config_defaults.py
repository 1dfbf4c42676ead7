"""Settings from the environment: the defaults of an empty one, every documented variable
read, and empty values taken for unset."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from jobqueue.adapters.postgres.pooler import Pooler
from jobqueue.adapters.telemetry.logging import LogFormat
from jobqueue.domain.flow import QueueLimits
from jobqueue.entrypoints.config.settings import SETTINGS, Settings
from jobqueue.entrypoints.config.variables import HttpAddress
from jobqueue.entrypoints.service.compose import http_config
from jobqueue.entrypoints.worker.pool_config import concurrency, pool_config


def test_an_empty_environment_gives_the_documented_defaults() -> None:
    settings = Settings.from_env({})

    assert settings.database_url is None
    assert settings.data_dir == Path(".jobqueue/pgdata")
    assert settings.http_addr is None  # the command's default: api_listener
    assert settings.metrics_addr is None
    assert settings.workers == 4
    assert settings.max_attempts == 5
    assert settings.job_timeout == timedelta(seconds=30)
    assert settings.lease_duration == timedelta(seconds=30)
    assert settings.statement_timeout == timedelta(seconds=5)
    assert settings.db_client_timeout == timedelta(seconds=6)
    assert settings.recovery_interval == timedelta(seconds=30)
    assert settings.retention_completed == timedelta(hours=168)
    assert settings.retention_failed == timedelta(hours=720)
    assert settings.retention_interval == timedelta(minutes=1)
    assert settings.poll_interval == timedelta(seconds=1)
    assert settings.notify is True
    assert settings.backoff_base == timedelta(seconds=1)
    assert settings.backoff_max == timedelta(minutes=5)
    assert settings.shutdown_timeout == timedelta(seconds=20)
    assert settings.drain_delay == timedelta(0)
    assert settings.max_body_bytes == 1024 * 1024
    assert settings.result_max_bytes == 1024 * 1024
    assert settings.webhook_allow_private is False
    assert settings.log_level == "INFO"
    assert settings.auto_migrate is True
    assert settings.handler_modules == ()
    assert settings.api_tokens == frozenset()
    assert settings.dashboard_read_only is False
    assert settings.trace_url is None


def test_every_documented_variable_is_read() -> None:
    # A variable listed in --help but never parsed would be silently ignored.
    environ = {
        "DATABASE_URL": "postgresql://u:p@db:5432/jobs",
        "DATABASE_POOLER": "pgbouncer",
        "JOBQUEUE_DATA_DIR": "/var/lib/jq",
        "HTTP_ADDR": "127.0.0.1:9000",
        "METRICS_ADDR": "127.0.0.1:9100",
        "WORKERS": "8",
        "QUEUES": "default=3,emails",
        "QUEUE_LIMITS": "emails concurrency=2",
        "MAX_ATTEMPTS": "7",
        "JOB_TIMEOUT": "10s",
        "MAX_SNOOZES": "12",
        "RESULT_MAX_BYTES": "64KiB",
        "LEASE_DURATION": "20s",
        "STATEMENT_TIMEOUT": "2s",
        "DB_CLIENT_TIMEOUT": "3s",
        "RECOVERY_INTERVAL": "5s",
        "RETENTION_COMPLETED": "24h",
        "RETENTION_FAILED": "0",
        "RETENTION_INTERVAL": "10m",
        "POLL_INTERVAL": "250ms",
        "NOTIFY": "false",
        "BACKOFF_BASE": "2s",
        "BACKOFF_MAX": "1m",
        "SHUTDOWN_TIMEOUT": "3s",
        "DRAIN_DELAY": "4s",
        "MAX_BODY_BYTES": "2048",
        "HTTP_READ_TIMEOUT": "3s",
        "HTTP_MAX_CONNECTIONS": "64",
        "BUILTIN_HANDLERS": "false",
        "WEBHOOK_ALLOW_PRIVATE": "true",
        "LOG_LEVEL": "debug",
        "LOG_FORMAT": "TEXT",
        "AUTO_MIGRATE": "false",
        "JOBQUEUE_HANDLERS": "a.b",
        "API_TOKENS": "t1",
        "DASHBOARD_READ_ONLY": "yes",
        "TRACE_URL": "https://traces.example/t/{trace_id}",
    }
    assert set(environ) == {row.env for row in SETTINGS}

    settings = Settings.from_env(environ)

    assert settings.database_url == "postgresql://u:p@db:5432/jobs"
    assert settings.database_pooler is Pooler.PGBOUNCER
    assert settings.data_dir == Path("/var/lib/jq")
    assert settings.http_addr == HttpAddress("127.0.0.1", 9000, "127.0.0.1:9000")
    assert settings.metrics_addr == HttpAddress("127.0.0.1", 9100, "127.0.0.1:9100")
    assert settings.workers == 8
    assert settings.queues == (("default", 3), ("emails", None))
    assert concurrency(settings) == {"default": 3, "emails": 8}
    assert settings.queue_limits == (("emails", QueueLimits(concurrency=2)),)
    assert settings.max_attempts == 7
    assert settings.job_timeout == timedelta(seconds=10)
    assert settings.max_snoozes == 12
    assert pool_config(settings).max_snoozes == 12
    assert pool_config(settings).result_max_bytes == 64 * 1024
    assert settings.lease_duration == timedelta(seconds=20)
    assert settings.statement_timeout == timedelta(seconds=2)
    assert settings.db_client_timeout == timedelta(seconds=3)
    assert settings.recovery_interval == timedelta(seconds=5)
    assert settings.retention_completed == timedelta(hours=24)
    assert settings.retention_failed == timedelta(0)
    assert settings.retention_interval == timedelta(minutes=10)
    assert settings.poll_interval == timedelta(milliseconds=250)
    assert settings.notify is False
    assert settings.backoff_base == timedelta(seconds=2)
    assert settings.backoff_max == timedelta(minutes=1)
    assert settings.shutdown_timeout == timedelta(seconds=3)
    assert settings.drain_delay == timedelta(seconds=4)
    assert settings.max_body_bytes == 2048
    assert settings.http_read_timeout == timedelta(seconds=3)
    assert settings.http_max_connections == 64
    assert settings.builtin_handlers is False
    assert settings.webhook_allow_private is True
    assert settings.log_level == "DEBUG"
    assert settings.log_format is LogFormat.TEXT
    assert settings.auto_migrate is False
    assert settings.handler_modules == ("a.b",)
    assert settings.api_tokens == frozenset({"t1"})
    assert settings.dashboard_read_only is True
    assert settings.trace_url == "https://traces.example/t/{trace_id}"
    assert http_config(settings).read_only is True


def test_empty_and_blank_values_count_as_unset() -> None:
    settings = Settings.from_env({"DATABASE_URL": "", "WORKERS": "  ", "API_TOKENS": ""})

    assert settings.database_url is None
    assert settings.workers == 4
    assert settings.api_tokens == frozenset()
