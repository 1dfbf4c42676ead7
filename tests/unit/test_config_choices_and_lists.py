"""Settings that are a choice or a list: the booleans, LOG_LEVEL, JOBQUEUE_HANDLERS and
API_TOKENS."""

from __future__ import annotations

import pytest

from jobqueue.entrypoints.config.settings import Settings
from tests.support.settings_problems import problems_of


@pytest.mark.parametrize("name", ["WEBHOOK_ALLOW_PRIVATE", "AUTO_MIGRATE", "NOTIFY"])
@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("true", True),
        ("TRUE", True),
        ("1", True),
        ("yes", True),
        ("on", True),
        ("false", False),
        ("False", False),
        ("0", False),
        ("no", False),
        ("off", False),
    ],
)
def test_booleans(name: str, raw: str, expected: bool) -> None:
    assert getattr(Settings.from_env({name: raw}), name.lower()) is expected


@pytest.mark.parametrize("name", ["WEBHOOK_ALLOW_PRIVATE", "AUTO_MIGRATE", "NOTIFY"])
def test_boolean_refusal(name: str) -> None:
    assert problems_of({name: "maybe"}) == [f"{name}: 'maybe' is not a boolean; use true or false"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("debug", "DEBUG"), ("INFO", "INFO"), ("warn", "WARNING"), ("Error", "ERROR")],
)
def test_log_levels(raw: str, expected: str) -> None:
    assert Settings.from_env({"LOG_LEVEL": raw}).log_level == expected


def test_an_unknown_log_level_is_refused() -> None:
    [problem] = problems_of({"LOG_LEVEL": "chatty"})

    assert problem == (
        "LOG_LEVEL: 'chatty' is not a log level; use one of DEBUG, INFO, WARNING, ERROR, CRITICAL"
    )


def test_handler_modules_are_a_comma_separated_list() -> None:
    settings = Settings.from_env({"JOBQUEUE_HANDLERS": " app.jobs, other_pkg.handlers ,,"})

    assert settings.handler_modules == ("app.jobs", "other_pkg.handlers")


@pytest.mark.parametrize("raw", ["app/jobs.py", "app..jobs", "1app", "app.jobs:registry"])
def test_handler_modules_must_be_module_paths(raw: str) -> None:
    [problem] = problems_of({"JOBQUEUE_HANDLERS": raw})

    assert problem.startswith("JOBQUEUE_HANDLERS: ")
    assert "is not a module path such as 'mypackage.jobs'" in problem


def test_api_tokens_are_a_comma_separated_set() -> None:
    settings = Settings.from_env({"API_TOKENS": "alpha, beta,alpha"})

    assert settings.api_tokens == frozenset({"alpha", "beta"})


def test_api_tokens_that_hold_no_token_are_refused() -> None:
    assert problems_of({"API_TOKENS": " , ,"}) == [
        "API_TOKENS: holds no token; unset it to turn authentication off"
    ]


def test_api_tokens_with_characters_a_header_cannot_carry_are_refused_without_echoing() -> None:
    [problem] = problems_of({"API_TOKENS": "good,s3cret wörd"})

    assert problem.startswith("API_TOKENS: token 2 contains characters other than visible ASCII")
    assert "s3cret" not in problem
