"""The `jobqueue` command itself: help, migrate, configuration and handler refusals."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import asyncpg
import pytest

from jobqueue.adapters.postgres.schema_version import head_revisions
from jobqueue.entrypoints.config.settings import Settings
from jobqueue.entrypoints.service.handler_modules import build_registry, load_handlers
from jobqueue.entrypoints.service.runtime import StartupError
from tests.support.postgres import dsn
from tests.support.processes import REPO_ROOT, environment, run


@pytest.mark.slow
def test_help_lists_the_commands_the_environment_and_the_exit_codes() -> None:
    result = run(["--help"])

    assert result.returncode == 0
    for word in ("serve", "api", "worker", "migrate", "LEASE_DURATION", "API_TOKENS", "130"):
        assert word in result.stdout, word


@pytest.mark.parametrize("command", ["serve", "api", "worker", "migrate"])
@pytest.mark.slow
def test_each_command_has_useful_help_of_its_own(command: str) -> None:
    result = run([command, "--help"])

    assert result.returncode == 0
    assert f"usage: jobqueue {command}" in result.stdout
    assert "DATABASE_URL" in result.stdout
    if command != "migrate":
        assert "--handlers" in result.stdout
        assert "SHUTDOWN_TIMEOUT" in result.stdout


@pytest.mark.slow
def test_python_dash_m_runs_the_same_command() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "jobqueue", "--help"],
        cwd=REPO_ROOT,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 0
    assert "usage: jobqueue" in result.stdout


@pytest.mark.slow
def test_a_command_is_required() -> None:
    result = run([])

    assert result.returncode == 2
    assert "usage: jobqueue" in result.stderr


@pytest.mark.slow
def test_migrate_brings_an_empty_database_to_head_and_is_repeatable(
    empty_database_url: str,
) -> None:
    first = run(["migrate"], DATABASE_URL=empty_database_url)
    again = run(["migrate"], DATABASE_URL=empty_database_url)

    assert first.returncode == 0, first.stderr
    assert again.returncode == 0, again.stderr
    assert {asyncio.run(_version(empty_database_url))} == head_revisions()
    messages = [json.loads(line)["message"] for line in first.stdout.splitlines() if line]
    assert "database schema is up to date" in messages


async def _version(url: str) -> str:
    connection = await asyncpg.connect(dsn(url))
    try:
        return str(await connection.fetchval("SELECT version_num FROM alembic_version"))
    finally:
        await connection.close()


@pytest.mark.parametrize("command", ["serve", "api", "worker", "migrate"])
@pytest.mark.slow
def test_a_bad_lease_duration_stops_the_process_before_it_starts(command: str) -> None:
    result = run([command], DB_CLIENT_TIMEOUT="6s", LEASE_DURATION="9s")

    assert result.returncode == 2
    assert "LEASE_DURATION: 9s must exceed 1.5 × DB_CLIENT_TIMEOUT (6s)" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


@pytest.mark.slow
def test_every_configuration_problem_is_printed_on_its_own_line() -> None:
    result = run(["serve"], WORKERS="none", LEASE_DURATION="1s", HTTP_ADDR="8080", LOG_LEVEL="x")

    assert result.returncode == 2
    problem_lines = [line.strip() for line in result.stderr.splitlines()[1:]]
    assert [line.split(":", 1)[0] for line in problem_lines] == [
        "HTTP_ADDR",
        "WORKERS",
        "LOG_LEVEL",
        "LEASE_DURATION",
    ]
    assert result.stderr.splitlines()[0] == "jobqueue: invalid configuration:"


@pytest.mark.slow
def test_a_missing_handler_module_is_a_clear_startup_error(database_url: str) -> None:
    result = run(["worker", "--handlers", "no_such_package.jobs"], DATABASE_URL=database_url)

    assert result.returncode == 1
    assert "handler module 'no_such_package.jobs' was not found" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


@pytest.mark.slow
def test_a_handler_module_without_a_registry_is_a_clear_startup_error(
    database_url: str,
) -> None:
    result = run(
        ["worker"],
        DATABASE_URL=database_url,
        JOBQUEUE_HANDLERS="tests.integration.user_handlers.no_registry",
    )

    assert result.returncode == 1
    assert "handler module 'tests.integration.user_handlers.no_registry' (" in result.stderr
    assert "no_registry.py) defines no `registry`. A handler module defines" in result.stderr
    assert "`registry = jobqueue.Registry()` and registers each job type's" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


@pytest.mark.slow
def test_handlers_naming_a_module_of_another_kind_says_which_file_it_found(
    database_url: str,
) -> None:
    # `json` is found (the standard library's), and holds no handlers.
    result = run(["serve", "--handlers", "json"], DATABASE_URL=database_url)

    assert result.returncode == 1
    assert f"handler module 'json' ({json.__file__}) defines no `registry`" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


@pytest.mark.parametrize(
    ("module", "said"),
    [
        ("empty_registry", "registers no handler on its `registry`"),
        ("not_a_registry", "defines `registry` as a dict, not a jobqueue.Registry"),
    ],
)
def test_a_handler_module_registering_nothing_says_what_it_must_define(
    module: str, said: str
) -> None:
    with pytest.raises(StartupError) as caught:
        load_handlers(f"tests.integration.user_handlers.{module}")

    message = str(caught.value)
    assert said in message
    assert '`@registry.handler("send_email")` on an `async def send_email(ctx, payload)`' in (
        message
    )


@pytest.mark.slow
def test_a_handler_flag_with_a_bad_module_path_is_a_usage_error() -> None:
    result = run(["serve", "--handlers", "app/jobs.py"])

    assert result.returncode == 2
    assert "--handlers: 'app/jobs.py' is not a module path" in result.stderr


def test_a_handler_module_failing_inside_is_not_reported_as_missing() -> None:
    with pytest.raises(StartupError) as caught:
        load_handlers("tests.integration.user_handlers.broken_dependency")

    message = str(caught.value)
    assert "failed to import" in message
    assert "jobqueue_test_dependency_that_does_not_exist" in message
    assert "was not found" not in message


def test_a_handler_module_claiming_a_built_in_type_is_refused() -> None:
    settings = Settings(handler_modules=("tests.integration.user_handlers.clashing",))

    with pytest.raises(StartupError) as caught:
        build_registry(settings)

    assert "job type 'sleep' already has a handler" in str(caught.value)


def test_handler_modules_add_their_types_to_the_built_ins() -> None:
    registry = build_registry(Settings(handler_modules=("tests.integration.user_handlers",)))

    assert list(registry) == ["greet", "sleep", "webhook"]


def test_builtin_handlers_false_leaves_only_the_modules_types() -> None:
    settings = Settings(
        handler_modules=("tests.integration.user_handlers.clashing",), builtin_handlers=False
    )

    # The module's own `sleep` no longer clashes: there is no built-in one.
    assert "sleep" in build_registry(settings)
    assert "webhook" not in build_registry(settings)
    assert list(build_registry(Settings(builtin_handlers=False))) == []
