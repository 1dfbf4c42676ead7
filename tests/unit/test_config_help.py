"""The settings table: one row a field, its defaults as help shows them, and the help of
each command listing the settings it uses."""

from __future__ import annotations

from dataclasses import fields

import pytest

from jobqueue.adapters.telemetry.tracing_config import TRACING_ENVIRONMENT
from jobqueue.entrypoints.cli.main import build_parser
from jobqueue.entrypoints.config.settings import SETTINGS, Settings
from jobqueue.entrypoints.config.variables import (
    COMMANDS,
    TRACING_COMMANDS,
    Command,
    Setting,
    format_size,
    parse_size,
)


def test_every_field_but_tracing_is_one_row_of_the_table() -> None:
    assert [row.attribute for row in SETTINGS] == [
        f.name for f in fields(Settings) if f.name != "tracing"
    ]
    assert len({row.env for row in SETTINGS}) == len(SETTINGS)
    assert all(row.commands and row.help for row in SETTINGS)


def test_each_default_is_the_field_default() -> None:
    defaults = Settings()

    for row in SETTINGS:
        assert getattr(defaults, row.attribute) == row.default, row.env


@pytest.mark.parametrize(
    "row", [row for row in SETTINGS if row.shown != "unset"], ids=lambda row: row.env
)
def test_a_default_as_help_shows_it_reads_back_as_the_default(row: Setting) -> None:
    # METRICS_ADDR's, HTTP_ADDR's and LOG_FORMAT's defaults depend on the command and on
    # stdout: help says so in words.
    if row.env == "METRICS_ADDR":
        assert row.shown == ":9090 for worker, none for serve/api"
        return
    if row.env == "HTTP_ADDR":
        assert row.shown == "127.0.0.1:8080 for serve, :8080 for api"
        return
    if row.env == "LOG_FORMAT":
        assert row.default is None
        return

    assert row.parse(row.shown) == row.default


@pytest.mark.parametrize("size", [64, 1000, 1 << 10, 1536 << 10, 1 << 20, 3 << 30])
def test_sizes_are_shown_the_way_they_are_read(size: int) -> None:
    assert parse_size(format_size(size)) == size


def test_a_size_is_shown_in_the_largest_unit_that_divides_it() -> None:
    assert [format_size(n) for n in (1 << 20, 1536 << 10, 1000, 0)] == [
        "1MiB",
        "1536KiB",
        "1000",
        "0",
    ]


def help_of(command: Command | None, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"] if command is None else [command, "--help"])
    return capsys.readouterr().out


def listed(help_text: str) -> list[str]:
    """The variables in the environment and tracing sections of a help text, in order."""
    names = []
    for line in help_text.splitlines():
        words = line.split()
        if line.startswith("  ") and words and words[0].isupper() and "[default:" in line:
            names.append(words[0])
    return names


def test_the_top_level_help_lists_every_setting_then_the_tracing_variables(
    capsys: pytest.CaptureFixture[str],
) -> None:
    help_text = help_of(None, capsys)

    assert listed(help_text) == [row.env for row in SETTINGS] + [
        name for name, _, _ in TRACING_ENVIRONMENT
    ]
    for row in SETTINGS:
        assert f"{row.help} [default: {row.shown}]" in help_text


@pytest.mark.parametrize("command", COMMANDS)
def test_a_command_help_lists_only_the_settings_the_command_uses(
    command: Command, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = [row.env for row in SETTINGS if command in row.commands]
    if command in TRACING_COMMANDS:
        expected += [name for name, _, _ in TRACING_ENVIRONMENT]

    assert listed(help_of(command, capsys)) == expected


@pytest.mark.parametrize(
    ("command", "absent"),
    [
        ("worker", "HTTP_ADDR"),
        ("worker", "API_TOKENS"),
        ("api", "WORKERS"),
        ("migrate", "NOTIFY"),
        ("bench", "JOBQUEUE_DATA_DIR"),
    ],
)
def test_settings_a_command_does_not_use_stay_out_of_its_help(
    command: Command, absent: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert absent not in listed(help_of(command, capsys))
