"""The rooms of the code, held: no module over 400 lines; the client and the wire types
import nothing of the server's; the HTTP entry point nothing of the worker's; the
benchmark lives outside the entry points. Read from the source, so an import hidden in
a function counts too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import jobqueue

PACKAGE = Path(jobqueue.__file__).parent
MAX_LINES = 400


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports_of(path: Path) -> set[str]:
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]
    return _imports(path.read_text(), package)


def _imports(source: str, package: str) -> set[str]:
    """Every module `source` (of `package`) imports, absolute."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")
                base = ".".join(parent[: len(parent) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _under(directory: str) -> list[Path]:
    return sorted((PACKAGE / directory).rglob("*.py"))


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: _module(p))
def test_no_module_is_over_400_lines(path: Path) -> None:
    assert len(path.read_text().splitlines()) <= MAX_LINES


@pytest.mark.parametrize(
    ("room", "forbidden"),
    [
        ("client", "jobqueue.entrypoints"),
        ("wire", "jobqueue.entrypoints"),
        ("wire", "jobqueue.adapters"),
        ("entrypoints/http", "jobqueue.entrypoints.worker"),
        ("entrypoints", "jobqueue.bench"),
        ("domain", "jobqueue.adapters"),
        ("adapters", "jobqueue.entrypoints"),
    ],
)
def test_a_room_imports_nothing_of_another(room: str, forbidden: str) -> None:
    found = {
        f"{_module(path)}: {name}"
        for path in _under(room)
        for name in _imports_of(path)
        if name == forbidden or name.startswith(forbidden + ".")
    }
    # The command's `bench` subcommand hands over to the benchmark's package, lazily.
    allowed = {
        "jobqueue.entrypoints.cli.main: jobqueue.bench.command",
        "jobqueue.entrypoints.cli.main: jobqueue.bench.command.parse_options",
        "jobqueue.entrypoints.cli.main: jobqueue.bench.command.run_bench",
    }
    assert found - allowed == set()


def test_the_entry_points_hold_no_benchmark() -> None:
    assert not (PACKAGE / "entrypoints" / "bench").exists()
    assert (PACKAGE / "bench" / "command.py").exists()


def test_the_check_sees_imports_hidden_in_functions_and_relative_ones() -> None:
    # The check above is only worth something if it can fail.
    source = (
        "def f():\n    from jobqueue.entrypoints.http import app\n    from ..worker import pool\n"
    )
    found = _imports(source, "jobqueue.entrypoints.http")
    assert {"jobqueue.entrypoints.http.app", "jobqueue.entrypoints.worker.pool"} <= found


def test_no_two_classes_share_a_name() -> None:
    # One name, one thing: a reader who meets a name knows which it is.
    seen: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                seen.setdefault(node.name, []).append(_module(path))
    assert {name: where for name, where in seen.items() if len(where) > 1} == {}
