"""Settings of retention: how long finished jobs are kept, and the refusals of
RETENTION_COMPLETED and RETENTION_FAILED."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobqueue.domain.status import Status
from jobqueue.entrypoints.config.rules import ConfigError
from jobqueue.entrypoints.config.settings import Settings
from tests.support.settings_problems import problems_of


def test_retention_policy_keeps_finished_jobs_for_the_configured_times() -> None:
    settings = Settings.from_env({"RETENTION_COMPLETED": "1h30m", "RETENTION_FAILED": "240h"})

    assert settings.retention_policy().ages == {
        Status.COMPLETED: timedelta(hours=1, minutes=30),
        Status.FAILED: timedelta(days=10),
        Status.CANCELLED: timedelta(days=10),
    }


@pytest.mark.parametrize(
    ("name", "kept"),
    [
        ("RETENTION_COMPLETED", {Status.COMPLETED}),
        ("RETENTION_FAILED", {Status.FAILED, Status.CANCELLED}),
    ],
)
def test_a_zero_retention_keeps_those_jobs_forever(name: str, kept: set[Status]) -> None:
    ages = Settings.from_env({name: "0"}).retention_policy().ages

    assert kept.isdisjoint(ages)
    assert set(ages) | kept == {Status.COMPLETED, Status.FAILED, Status.CANCELLED}


def test_retention_in_days_is_refused_with_the_units_go_accepts() -> None:
    [problem] = problems_of({"RETENTION_COMPLETED": "7d"})

    assert problem.startswith(
        "RETENTION_COMPLETED: invalid duration '7d'; use a number with a unit"
    )


@pytest.mark.parametrize("name", ["RETENTION_COMPLETED", "RETENTION_FAILED"])
def test_negative_retention_is_refused(name: str) -> None:
    [problem] = problems_of({name: "-1h"})

    assert problem.startswith(f"{name}: invalid duration '-1h'; durations cannot be negative")


def test_negative_retention_is_refused_on_direct_construction_too() -> None:
    with pytest.raises(ConfigError) as caught:
        Settings(retention_failed=timedelta(seconds=-1))

    assert caught.value.problems == [
        "RETENTION_FAILED: must not be negative, got -1s; 0 keeps the jobs"
    ]
