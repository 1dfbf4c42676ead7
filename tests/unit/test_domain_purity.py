"""The domain is a leaf: it imports the standard library and itself, nothing else.

Two independent checks: a static one over the source (catches imports hidden in
functions, `try` blocks and `TYPE_CHECKING` branches, which may never run in a test),
and a dynamic one in a fresh interpreter (catches whatever the static one cannot see,
such as a standard-library-looking name shadowed by an installed package).
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

import jobqueue.domain

DOMAIN_PACKAGE = "jobqueue.domain"
DOMAIN_DIR = Path(jobqueue.domain.__file__).parent
# The parent package is imported on the way to any domain module; its own purity is
# covered by the dynamic check below, which sees everything `jobqueue/__init__.py` loads.
PARENT_PACKAGE = "jobqueue"


def domain_modules() -> list[tuple[str, Path]]:
    modules = []
    for path in sorted(DOMAIN_DIR.glob("*.py")):
        name = DOMAIN_PACKAGE if path.stem == "__init__" else f"{DOMAIN_PACKAGE}.{path.stem}"
        modules.append((name, path))
    return modules


def is_allowed(module: str) -> bool:
    """Standard library, or the domain package itself."""
    top = module.partition(".")[0]
    return (
        top in sys.stdlib_module_names
        or module == DOMAIN_PACKAGE
        or module.startswith(DOMAIN_PACKAGE + ".")
    )


def _package_of(module: str, is_package: bool) -> str:
    return module if is_package else module.rpartition(".")[0]


def _dynamic_import_target(call: ast.Call) -> tuple[str, ast.expr | None] | None:
    """For `__import__(x)`, `importlib.import_module(x)` or `import_module(x)`: (kind, x)."""
    func = call.func
    if isinstance(func, ast.Name) and func.id in {"__import__", "import_module"}:
        name = func.id
    elif isinstance(func, ast.Attribute) and func.attr in {"__import__", "import_module"}:
        name = func.attr
    else:
        return None
    first = call.args[0] if call.args else None
    for keyword in call.keywords:
        if keyword.arg == "name":
            first = keyword.value
    return name, first


def forbidden_imports(source: str, module: str, *, is_package: bool = False) -> list[str]:
    """Every import in `source` (as module `module`) that leaves stdlib + the domain.

    Returns human-readable findings; an empty list means the source is pure.
    """
    package = _package_of(module, is_package)
    findings: list[str] = []

    def check(target: str, line: int) -> None:
        try:
            absolute = importlib.util.resolve_name(target, package)
        except ImportError:
            findings.append(f"line {line}: {target!r} reaches beyond the top-level package")
            return
        if not is_allowed(absolute):
            findings.append(f"line {line}: imports {absolute}")

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                check(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            check("." * node.level + (node.module or ""), node.lineno)
        elif isinstance(node, ast.Call):
            target = _dynamic_import_target(node)
            if target is None:
                continue
            kind, argument = target
            if not (isinstance(argument, ast.Constant) and isinstance(argument.value, str)):
                # A computed name cannot be verified, and the domain has no use for one.
                findings.append(f"line {node.lineno}: {kind} with a computed module name")
                continue
            check(argument.value, node.lineno)
    return findings


def third_party(loaded: list[str]) -> list[str]:
    """Modules in `loaded` that are neither stdlib, nor the domain, nor its parent package."""
    return [
        name for name in loaded if not (is_allowed(name) or name in {PARENT_PACKAGE, "__main__"})
    ]


def test_domain_package_has_the_modules_the_design_names() -> None:
    # Guards the checks below against passing vacuously on an empty or moved package.
    names = {name for name, _ in domain_modules()}
    assert {
        f"{DOMAIN_PACKAGE}.{stem}"
        for stem in ("job", "errors", "outcome", "backoff", "registry", "ports", "durations")
    } <= names


@pytest.mark.parametrize(
    ("module", "path"), domain_modules(), ids=[name for name, _ in domain_modules()]
)
def test_domain_module_source_imports_only_stdlib_and_domain(module: str, path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    assert forbidden_imports(source, module, is_package=path.stem == "__init__") == []


@pytest.mark.parametrize(
    "source",
    [
        "import msgspec",
        "import msgspec.json",
        "import json, msgspec",
        "from msgspec import Struct",
        "from sqlalchemy.ext.asyncio import AsyncEngine",
        "def decode():\n    import msgspec\n",
        "class C:\n    def f(self):\n        from litestar import Litestar\n",
        "try:\n    import orjson\nexcept ImportError:\n    orjson = None\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import asyncpg\n",
        "from .. import adapters",
        "from ..adapters.postgres import schema",
        "from ... import anything",
        "from jobqueue.entrypoints import cli",
        "import jobqueue",
        "import importlib\nimportlib.import_module('msgspec')",
        "import importlib\nimportlib.import_module(name='sqlalchemy')",
        "from importlib import import_module\nimport_module('litestar')",
        "import importlib\nimportlib.import_module('..adapters', 'jobqueue.domain')",
        "__import__('asyncpg')",
        "import importlib\nname = 'msg' + 'spec'\nimportlib.import_module(name)",
        "__import__(NAME)",
    ],
)
def test_checker_flags_a_non_stdlib_import(source: str) -> None:
    assert forbidden_imports(source, f"{DOMAIN_PACKAGE}.job") != []


@pytest.mark.parametrize(
    "source",
    [
        "from __future__ import annotations",
        "import json",
        "import collections.abc",
        "from datetime import timedelta",
        "from . import errors",
        "from .errors import Permanent",
        "from jobqueue.domain.job import Job",
        "import jobqueue.domain.errors",
        "import importlib\nimportlib.import_module('json')",
        "import importlib\nimportlib.import_module('.errors')",
        "__import__('math')",
    ],
)
def test_checker_accepts_stdlib_and_domain_imports(source: str) -> None:
    assert forbidden_imports(source, f"{DOMAIN_PACKAGE}.job") == []


def test_checker_resolves_relative_imports_from_the_package_init() -> None:
    # In __init__.py one dot is the domain package itself, two dots leave it.
    assert forbidden_imports("from . import job", DOMAIN_PACKAGE, is_package=True) == []
    assert forbidden_imports("from .. import adapters", DOMAIN_PACKAGE, is_package=True) != []


@pytest.mark.parametrize(
    "loaded",
    [["json", "msgspec"], ["sqlalchemy.ext.asyncio"], ["jobqueue.adapters.postgres"], ["_cffi"]],
)
def test_third_party_filter_flags_modules_outside_stdlib_and_domain(loaded: list[str]) -> None:
    assert third_party(loaded) == [loaded[-1]]


def modules_loaded_by_fresh_interpreter(imports: list[str]) -> list[str]:
    """`sys.modules` of a new interpreter after importing `imports`, sorted."""
    # -I -S: no user site, no .pth start-up hooks, so anything loaded beyond the standard
    # library came from the imports. The parent's sys.path keeps installed packages
    # importable, so a stray `import msgspec` loads msgspec rather than failing.
    code = (
        "import sys\n"
        f"sys.path[:0] = {[str(DOMAIN_DIR.parent.parent), *sys.path]!r}\n"
        f"import {', '.join(imports)}\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_fresh_interpreter_importing_every_domain_module_loads_no_third_party_module() -> None:
    modules = [name for name, _ in domain_modules()]
    loaded = modules_loaded_by_fresh_interpreter(modules)
    assert set(modules) <= set(loaded)
    assert third_party(loaded) == []


def test_fresh_interpreter_check_sees_a_third_party_import() -> None:
    # The same probe with one installed third-party package added must report it, so the
    # check above cannot pass merely because site-packages was out of reach.
    loaded = modules_loaded_by_fresh_interpreter([f"{DOMAIN_PACKAGE}.job", "msgspec"])
    assert "msgspec" in third_party(loaded)
