"""Alembic owns the schema: reversible, safe to run from several processes at once, and
in agreement with `schema.py`, the metadata the store queries."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import Column, MetaData, Text

from jobqueue.adapters.postgres.migrations import downgrade, upgrade
from jobqueue.adapters.postgres.schema import (
    job_dependencies,
    job_waits,
    jobs,
    key_starts,
    metadata,
    queues,
    type_rates,
)
from jobqueue.adapters.postgres.schema_workers import (
    job_rollup,
    job_types,
    periodic_slots,
    processes,
)
from jobqueue.domain.fields import MAX_PRIORITY, MIN_PRIORITY
from tests.support.migrating import HEAD, _drift, _fetch_sync, _job_columns, _job_indexes

PROJECT_ROOT = Path(__file__).resolve().parents[2]
RETENTION_INDEXES = {"ix_jobs_finished_by_type", "ix_jobs_dead_letter"}


def _alembic_executable() -> Path:
    in_project = PROJECT_ROOT / ".venv" / "bin" / "alembic"
    return in_project if in_project.exists() else Path(sys.executable).with_name("alembic")


def _versions(url: str) -> list[str]:
    exists = _fetch_sync(url, "SELECT to_regclass('alembic_version') IS NOT NULL")
    if not exists[0][0]:
        return []
    return [row[0] for row in _fetch_sync(url, "SELECT version_num FROM alembic_version")]


def test_upgrade_downgrade_upgrade_round_trips_on_an_empty_database(
    empty_database_url: str,
) -> None:
    url = empty_database_url
    upgrade(url)
    assert _versions(url) == [HEAD]
    assert "traceparent" in _job_columns(url)
    assert _job_indexes(url) >= RETENTION_INDEXES
    assert "ix_jobs_due_by_type" in _job_indexes(url)
    assert _fetch_sync(url, "SELECT to_regclass('job_rollup') IS NOT NULL") == [(True,)]

    downgrade(url, "0015")
    assert _fetch_sync(url, "SELECT to_regclass('job_rollup') IS NOT NULL") == [(False,)]
    assert _fetch_sync(url, "SELECT to_regclass('processes') IS NOT NULL") == [(True,)]

    downgrade(url, "0011")
    assert "timeout" not in _job_columns(url)
    assert _fetch_sync(url, "SELECT to_regclass('periodic_slots') IS NOT NULL") == [(False,)]
    assert "ix_jobs_due_by_type" not in _job_indexes(url)
    assert "ix_jobs_due_by_queue" in _job_indexes(url)

    downgrade(url, "0009")
    assert {"unique_key", "unique_states"}.isdisjoint(_job_columns(url))
    assert "uq_jobs_unique_key" not in _job_indexes(url)

    downgrade(url, "0008")
    assert "snoozes" not in _job_columns(url)
    assert "ix_jobs_cancelled" not in _job_indexes(url)

    downgrade(url, "0007")
    assert "ix_jobs_finished_by_type" not in _job_indexes(url)
    assert "ix_jobs_finished" in _job_indexes(url)

    assert {"started_at", "worker", "attempt_log"} <= _job_columns(url)
    downgrade(url, "0006")
    assert {"started_at", "worker", "attempt_log"}.isdisjoint(_job_columns(url))
    assert _fetch_sync(url, "SELECT to_regclass('queues') IS NOT NULL") == [(True,)]
    downgrade(url, "0005")
    assert _fetch_sync(url, "SELECT to_regclass('queues') IS NOT NULL") == [(False,)]

    downgrade(url, "0004")
    assert _versions(url) == ["0004"]
    assert {"queue", "priority"}.isdisjoint(_job_columns(url))
    assert "ix_jobs_due_by_queue" not in _job_indexes(url)
    assert "ix_jobs_due_key" in _job_indexes(url)

    downgrade(url, "0002")
    assert _versions(url) == ["0002"]
    assert not {"ix_jobs_finished", "ix_jobs_dead_letter"} & _job_indexes(url)

    downgrade(url, "0001")
    assert _versions(url) == ["0001"]
    assert _job_columns(url) == {column.name for column in jobs.c} - {
        "traceparent",
        "queue",
        "priority",
        "started_at",
        "worker",
        "attempt_log",
        "snoozes",
        "unique_key",
        "unique_states",
        "timeout",
        "partition_key",
        "result",
        "progress",
        "watched",
        "depends_on",
        "run_anyway",
        "workflow_id",
        "waiting_for",
        "has_dependents",
        "wait_id",
    }

    downgrade(url, "base")
    assert _versions(url) == []
    assert _job_columns(url) == set()

    upgrade(url)
    assert _versions(url) == [HEAD]
    assert _drift(url, metadata) == []


@pytest.mark.slow
def test_concurrent_upgrades_apply_each_migration_once(empty_database_url: str) -> None:
    environment = {**os.environ, "DATABASE_URL": empty_database_url}
    processes = [
        subprocess.Popen(
            [str(_alembic_executable()), "upgrade", "head"],
            cwd=PROJECT_ROOT,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = [process.communicate(timeout=300)[0] for process in processes]

    assert [process.returncode for process in processes] == [0] * 4, "\n".join(outputs)
    logs = "\n".join(outputs)
    assert logs.count("Running upgrade  -> 0001") == 1, logs
    assert logs.count("Running upgrade 0001 -> 0002") == 1, logs
    assert logs.count("Running upgrade 0002 -> 0003") == 1, logs
    assert logs.count("Running upgrade 0003 -> 0004") == 1, logs
    assert logs.count("Running upgrade 0004 -> 0005") == 1, logs
    assert logs.count("Running upgrade 0005 -> 0006") == 1, logs
    assert logs.count("Running upgrade 0006 -> 0007") == 1, logs
    assert logs.count("Running upgrade 0007 -> 0008") == 1, logs
    assert logs.count("Running upgrade 0008 -> 0009") == 1, logs
    assert logs.count("Running upgrade 0009 -> 0010") == 1, logs
    assert logs.count("Running upgrade 0010 -> 0011") == 1, logs
    assert _versions(empty_database_url) == [HEAD]


def test_the_priority_check_in_the_database_is_the_domain_s_range(database_url: str) -> None:
    # The revision spells the range out (it must keep meaning what it meant); the schema
    # derives it from the domain. They must agree.
    [(definition,)] = _fetch_sync(
        database_url,
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'ck_jobs_priority'",
    )
    assert definition == f"CHECK (((priority >= {MIN_PRIORITY}) AND (priority <= {MAX_PRIORITY})))"


def test_schema_module_and_migrations_agree(database_url: str) -> None:
    assert _drift(database_url, metadata) == []


def test_drift_check_notices_a_column_the_migrations_lack(database_url: str) -> None:
    # The agreement test above is only worth something if a difference shows up.
    changed = MetaData()
    queues.to_metadata(changed)
    job_types.to_metadata(changed)
    periodic_slots.to_metadata(changed)
    processes.to_metadata(changed)
    job_rollup.to_metadata(changed)
    key_starts.to_metadata(changed)
    type_rates.to_metadata(changed)
    job_dependencies.to_metadata(changed)
    job_waits.to_metadata(changed)
    jobs.to_metadata(changed).append_column(Column("colour", Text))
    drift = _drift(database_url, changed)
    assert [(entry[0], entry[3].name) for entry in drift] == [("add_column", "colour")]
