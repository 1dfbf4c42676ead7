"""The documents' configuration tables say what the code reads, in its order, with its
defaults: the README's settings table (`SETTINGS`), which the guide's configuration page
includes as it is, and the guide's tracing table (`TRACING_ENVIRONMENT`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jobqueue.adapters.telemetry import tracing_config
from jobqueue.adapters.telemetry.tracing_config import TRACING_ENVIRONMENT
from jobqueue.entrypoints.config.settings import SETTINGS

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# The guide's pages (mkdocs.yml): the configuration page includes the README's settings
# table between these markers (pymdownx.snippets); the tracing table lives on its page.
CONFIGURATION_PAGE = ROOT / "docs" / "configuration.md"
OBSERVABILITY_PAGE = ROOT / "docs" / "observability.md"
SETTINGS_START = "<!-- --8<-- [start:settings] -->"
SETTINGS_END = "<!-- --8<-- [end:settings] -->"
_VARIABLE = re.compile(r"`([A-Z][A-Z0-9_]*)`")
_CELL_SEPARATOR = re.compile(r"(?<!\\)\|")


def section(text: str, heading: str) -> str:
    """The body of the section under `heading`, up to the next heading of its level or
    above."""
    level = heading.split(" ", 1)[0]
    lines = text.splitlines()
    start = lines.index(heading) + 1
    for end in range(start, len(lines)):
        marks = lines[end].split(" ", 1)[0]
        if set(marks) == {"#"} and len(marks) <= len(level):
            return "\n".join(lines[start:end])
    return "\n".join(lines[start:])


def variables_table(body: str) -> list[tuple[str, str]]:
    """(variable, default) of each row of the first `| Variable | Default | ... |` table,
    the default without its code marks, as `--help` shows it."""
    lines = body.splitlines()
    starts = [number for number, line in enumerate(lines) if line.startswith("|")]
    assert starts, "no table in the section"
    rows: list[str] = []
    for line in lines[starts[0] :]:
        if not line.startswith("|"):
            break  # the end of the first table
        rows.append(line)
    header = [cell.strip() for cell in _CELL_SEPARATOR.split(rows[0])[1:-1]]
    assert header[:2] == ["Variable", "Default"], header
    table: list[tuple[str, str]] = []
    for row in rows[2:]:
        name, default = (cell.strip() for cell in _CELL_SEPARATOR.split(row)[1:3])
        match = _VARIABLE.fullmatch(name)
        assert match is not None, f"one variable per row, in code marks: {row}"
        table.append((match.group(1), default.replace("`", "")))
    return table


@pytest.fixture(scope="module")
def readme() -> str:
    return README.read_text(encoding="utf-8")


def test_the_configuration_table_lists_the_settings_in_order_with_their_defaults(
    readme: str,
) -> None:
    documented = variables_table(section(readme, "## Configuration"))

    assert documented == [(row.env, row.shown) for row in SETTINGS]


def test_the_configuration_page_shows_the_readme_table_of_the_settings(readme: str) -> None:
    # The page includes what stands between the markers: that must be the whole table.
    assert f'--8<-- "{README.name}:settings"' in CONFIGURATION_PAGE.read_text(encoding="utf-8")
    included = readme.split(SETTINGS_START, 1)[1].split(SETTINGS_END, 1)[0]
    table = "\n".join(line for line in included.splitlines() if line.strip())

    assert variables_table(table) == [(row.env, row.shown) for row in SETTINGS]
    assert included in section(readme, "## Configuration")


def test_the_tracing_table_lists_the_tracing_variables_in_order_with_their_defaults() -> None:
    page = OBSERVABILITY_PAGE.read_text(encoding="utf-8")
    documented = variables_table(section(page, "## Tracing"))

    assert documented == [(name, default) for name, default, _ in TRACING_ENVIRONMENT]


def test_the_tracing_help_lists_every_variable_the_tracing_configuration_reads() -> None:
    source = Path(tracing_config.__file__).read_text(encoding="utf-8")
    read = set(re.findall(r'"(OTEL_[A-Z_]+)"', source))

    assert read == {name for name, _, _ in TRACING_ENVIRONMENT}


def test_the_table_reader_keeps_to_its_section_and_to_unescaped_pipes() -> None:
    table = "\n".join(
        [
            "## Configuration",
            "| Variable | Default | Meaning |",
            "|---|---|---|",
            "| `B` | `2s` | b |",
            "| `A` | unset | a, with a \\| pipe |",
            "",
            "| `D` | `4` | another table |",
            "## Next",
            "| `C` | `3` | not in the section |",
        ]
    )

    assert variables_table(section(table, "## Configuration")) == [("B", "2s"), ("A", "unset")]
