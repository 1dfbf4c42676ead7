"""Settings that are durations: their Go form, their refusals, and the checks between the
lease, the timeouts and the backoff."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobqueue.adapters.postgres.limits import Limits
from jobqueue.entrypoints.config.settings import Settings
from tests.support.settings_problems import problems_of

DURATIONS = [
    ("JOB_TIMEOUT", "job_timeout"),
    ("LEASE_DURATION", "lease_duration"),
    ("STATEMENT_TIMEOUT", "statement_timeout"),
    ("DB_CLIENT_TIMEOUT", "db_client_timeout"),
    ("RECOVERY_INTERVAL", "recovery_interval"),
    ("RETENTION_COMPLETED", "retention_completed"),
    ("RETENTION_FAILED", "retention_failed"),
    ("RETENTION_INTERVAL", "retention_interval"),
    ("POLL_INTERVAL", "poll_interval"),
    ("BACKOFF_BASE", "backoff_base"),
    ("BACKOFF_MAX", "backoff_max"),
    ("SHUTDOWN_TIMEOUT", "shutdown_timeout"),
    ("DRAIN_DELAY", "drain_delay"),
]


@pytest.mark.parametrize(("name", "attribute"), DURATIONS)
def test_durations_are_read_in_go_form(name: str, attribute: str) -> None:
    environ = {name: "1h2m3.5s"}
    # Keep the cross-checks satisfied: the client outwaits the server, the lease leaves
    # time for a stuck renewal, the backoff cap is not below its base.
    if name == "STATEMENT_TIMEOUT":
        environ |= {"DB_CLIENT_TIMEOUT": "2h", "LEASE_DURATION": "4h"}
    if name == "DB_CLIENT_TIMEOUT":
        environ["LEASE_DURATION"] = "2h"
    if name == "BACKOFF_BASE":
        environ["BACKOFF_MAX"] = "2h"

    settings = Settings.from_env(environ)

    assert getattr(settings, attribute) == timedelta(hours=1, minutes=2, seconds=3.5)


@pytest.mark.parametrize(("name", "attribute"), DURATIONS)
def test_durations_without_a_unit_are_refused(name: str, attribute: str) -> None:
    [problem] = problems_of({name: "30"})

    assert problem.startswith(f"{name}: invalid duration '30'")


@pytest.mark.parametrize(
    "name",
    [
        "JOB_TIMEOUT",
        "LEASE_DURATION",
        "STATEMENT_TIMEOUT",
        "DB_CLIENT_TIMEOUT",
        "RECOVERY_INTERVAL",
        "RETENTION_INTERVAL",
        "POLL_INTERVAL",
        "BACKOFF_BASE",
    ],
)
def test_durations_that_must_be_positive_refuse_zero(name: str) -> None:
    problems = problems_of({name: "0s"})

    assert f"{name}: must be longer than 0, got 0s" in problems


@pytest.mark.parametrize("name", ["SHUTDOWN_TIMEOUT", "DRAIN_DELAY"])
def test_shutdown_timeout_and_drain_delay_may_be_zero(name: str) -> None:
    attribute = name.lower()

    assert getattr(Settings.from_env({name: "0"}), attribute) == timedelta(0)


def test_negative_durations_are_refused() -> None:
    [problem] = problems_of({"DRAIN_DELAY": "-1s"})

    assert problem.startswith("DRAIN_DELAY: invalid duration '-1s'; durations cannot be negative")


def test_an_attempt_may_outlast_its_lease_since_the_lease_is_renewed() -> None:
    settings = Settings.from_env({"JOB_TIMEOUT": "3h", "LEASE_DURATION": "10s"})

    assert (settings.job_timeout, settings.lease_duration) == (
        timedelta(hours=3),
        timedelta(seconds=10),
    )


@pytest.mark.parametrize("lease", ["9s", "5s", "8.999s"])
def test_lease_duration_must_exceed_one_and_a_half_client_timeouts(lease: str) -> None:
    [problem] = problems_of({"DB_CLIENT_TIMEOUT": "6s", "LEASE_DURATION": lease})

    assert problem.startswith(
        f"LEASE_DURATION: {lease} must exceed 1.5 × DB_CLIENT_TIMEOUT (6s): leases are renewed"
    )


def test_a_lease_just_over_one_and_a_half_client_timeouts_is_accepted() -> None:
    settings = Settings.from_env({"DB_CLIENT_TIMEOUT": "6s", "LEASE_DURATION": "9.001s"})

    assert settings.lease_duration == timedelta(seconds=9.001)


def test_the_default_lease_is_checked_against_a_configured_client_timeout() -> None:
    [problem] = problems_of({"DB_CLIENT_TIMEOUT": "20s", "STATEMENT_TIMEOUT": "10s"})

    assert problem.startswith("LEASE_DURATION: 30s must exceed 1.5 × DB_CLIENT_TIMEOUT (20s)")


@pytest.mark.parametrize("client", ["5s", "4s"])
def test_the_client_timeout_must_exceed_the_statement_timeout(client: str) -> None:
    [problem] = problems_of({"STATEMENT_TIMEOUT": "5s", "DB_CLIENT_TIMEOUT": client})

    assert problem.startswith(
        f"DB_CLIENT_TIMEOUT: {client} must exceed STATEMENT_TIMEOUT (5s), so that the server"
    )


def test_database_limits_speak_the_server_s_unit() -> None:
    limits = Limits(statement=timedelta(seconds=1), client=timedelta(seconds=2))

    assert limits.statement_milliseconds == 1000


def test_backoff_max_below_backoff_base_is_refused() -> None:
    assert problems_of({"BACKOFF_BASE": "10s", "BACKOFF_MAX": "5s"}) == [
        "BACKOFF_MAX: 5s is shorter than BACKOFF_BASE (10s)"
    ]
