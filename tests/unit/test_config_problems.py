"""Settings refused all at once: every problem reported together, a cross-check skipped
when one side failed, the same checks on direct construction, and secrets kept out of
the repr."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobqueue.entrypoints.config.rules import ConfigError
from jobqueue.entrypoints.config.settings import Settings
from tests.support.settings_problems import problems_of


def test_every_problem_is_reported_at_once_one_per_line() -> None:
    problems = problems_of(
        {
            "WORKERS": "0",
            "HTTP_ADDR": "nope",
            "DB_CLIENT_TIMEOUT": "forever",
            "LEASE_DURATION": "1s",
            "LOG_LEVEL": "loud",
        }
    )

    assert [problem.split(":", 1)[0] for problem in problems] == [
        "HTTP_ADDR",
        "DB_CLIENT_TIMEOUT",
        "LOG_LEVEL",
        "WORKERS",
    ]
    assert str(ConfigError(problems)) == "\n".join(problems)


def test_a_cross_check_is_skipped_when_one_side_failed_to_parse() -> None:
    # DB_CLIENT_TIMEOUT is broken: comparing the lease against its default would mislead.
    problems = problems_of({"DB_CLIENT_TIMEOUT": "soon", "LEASE_DURATION": "5s"})

    assert [problem.split(":", 1)[0] for problem in problems] == ["DB_CLIENT_TIMEOUT"]


def test_direct_construction_is_checked_too() -> None:
    with pytest.raises(ConfigError) as caught:
        Settings(lease_duration=timedelta(seconds=9))

    assert caught.value.problems[0].startswith("LEASE_DURATION: 9s must exceed")


def test_secrets_stay_out_of_the_settings_repr() -> None:
    settings = Settings.from_env(
        {"DATABASE_URL": "postgresql://u:hunter2@h/db", "API_TOKENS": "tok-123"}
    )

    assert "hunter2" not in repr(settings)
    assert "tok-123" not in repr(settings)
