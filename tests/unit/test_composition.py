"""The composition root: the components each command runs, in order and with their
phases; what building them imports; and the HTTP layer seeing only its ports."""

from __future__ import annotations

import ast
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

import jobqueue.entrypoints.http
from jobqueue.adapters.handlers import builtin_registry
from jobqueue.adapters.postgres.database import create_engine
from jobqueue.entrypoints.config.settings import Settings
from jobqueue.entrypoints.service.components import StopPhase
from jobqueue.entrypoints.service.compose import Roles, build_components
from jobqueue.entrypoints.service.runtime import Listeners
from jobqueue.entrypoints.worker.pool_config import pool_configs

# No connection is opened: building the components only wires them.
UNUSED_URL = "postgresql+asyncpg://nobody@localhost:1/nothing"
SIGNAL, DRAINED, LAST = StopPhase.SIGNAL, StopPhase.DRAINED, StopPhase.LAST


@pytest.fixture
def sockets() -> Iterator[tuple[socket.socket, socket.socket]]:
    api, metrics = socket.socket(), socket.socket()
    yield api, metrics
    api.close()
    metrics.close()


def built(settings: Settings, roles: Roles, listeners: Listeners) -> list[tuple[str, StopPhase]]:
    engine = create_engine(UNUSED_URL)
    components = build_components(
        settings, roles, builtin_registry(webhook_allow_private=False), engine, listeners, None
    )
    return [(component.name, component.phase) for component in components]


async def test_serve_with_a_metrics_listener_runs_every_component(
    sockets: tuple[socket.socket, socket.socket],
) -> None:
    api, metrics = sockets

    names = built(Settings(), Roles(http=True, workers=True), Listeners(api, metrics))

    assert names == [
        ("worker pool (default)", SIGNAL),
        ("queue pauses", SIGNAL),
        ("queue limits", SIGNAL),
        ("job types publisher", SIGNAL),
        ("process heartbeat", SIGNAL),
        ("lease recovery", SIGNAL),
        ("retention", SIGNAL),
        ("rollup flush", LAST),
        ("queue watch", SIGNAL),
        ("job types", LAST),
        ("readiness", SIGNAL),
        ("http", DRAINED),
        ("waits", SIGNAL),
        ("metrics server", LAST),
        ("queue depth", LAST),
        ("wake-up notifier", LAST),
        ("wake-up listener", LAST),
    ]


async def test_an_api_runs_no_worker_component(
    sockets: tuple[socket.socket, socket.socket],
) -> None:
    api, _ = sockets

    names = built(Settings(), Roles(http=True, workers=False), Listeners(api, None))

    assert names == [
        ("queue watch", SIGNAL),
        ("job types", LAST),
        ("readiness", SIGNAL),
        ("http", DRAINED),
        ("waits", SIGNAL),
        ("queue depth", LAST),
        ("wake-up notifier", LAST),
        # No pool to wake: it listens for the ends of the jobs its clients wait for.
        ("wake-up listener", LAST),
    ]


async def test_a_worker_without_listener_notify_or_job_retention_runs_only_its_loops() -> None:
    keep = timedelta(0)
    settings = Settings(notify=False, retention_completed=keep, retention_failed=keep)

    names = built(settings, Roles(http=False, workers=True), Listeners(None, None))

    assert names == [
        ("worker pool (default)", SIGNAL),
        ("queue pauses", SIGNAL),
        ("queue limits", SIGNAL),
        ("job types publisher", SIGNAL),
        ("process heartbeat", SIGNAL),
        ("lease recovery", SIGNAL),
        # With jobs kept forever, retention still prunes the dashboard's rollup.
        ("retention", SIGNAL),
        ("rollup flush", LAST),
        ("queue watch", SIGNAL),
    ]


async def test_a_worker_runs_one_pool_per_queue_in_the_order_given() -> None:
    keep = timedelta(0)
    settings = Settings(
        notify=False,
        retention_completed=keep,
        retention_failed=keep,
        workers=3,
        queues=(("default", 10), ("emails", 2), ("bulk", None)),
    )

    names = built(settings, Roles(http=False, workers=True), Listeners(None, None))

    assert names == [
        ("worker pool (default)", SIGNAL),
        ("worker pool (emails)", SIGNAL),
        ("worker pool (bulk)", SIGNAL),
        ("queue pauses", SIGNAL),
        ("queue limits", SIGNAL),
        ("job types publisher", SIGNAL),
        ("process heartbeat", SIGNAL),
        ("lease recovery", SIGNAL),
        # With jobs kept forever, retention still prunes the dashboard's rollup.
        ("retention", SIGNAL),
        ("rollup flush", LAST),
        ("queue watch", SIGNAL),
    ]
    configs = pool_configs(settings)
    assert [(c.queue, c.workers) for c in configs] == [("default", 10), ("emails", 2), ("bulk", 3)]


def fresh_interpreter_modules(code: str) -> list[str]:
    """The modules loaded once `code` ran in a new interpreter."""
    script = textwrap.dedent(code) + "\nimport sys\nprint('\\n'.join(sorted(sys.modules)))\n"
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


# jsonschema too: only an API checks payloads by the schemas workers published.
HTTP_MIGRATIONS_AND_TRACING_SDK = (
    "litestar",
    "uvicorn",
    "alembic",
    "opentelemetry.sdk",
    "jsonschema",
)


def under(modules: list[str], roots: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == root or m.startswith(root + ".") for root in roots)]


def test_building_a_worker_without_listener_imports_no_http_alembic_or_tracing_sdk() -> None:
    modules = fresh_interpreter_modules(
        f"""
        from jobqueue.adapters.handlers import builtin_registry
        from jobqueue.adapters.postgres.database import create_engine
        from jobqueue.entrypoints.service.compose import Roles, build_components
        from jobqueue.entrypoints.config.settings import Settings
        from jobqueue.entrypoints.service.runtime import Listeners

        build_components(
            Settings(),
            Roles(http=False, workers=True),
            builtin_registry(webhook_allow_private=False),
            create_engine({UNUSED_URL!r}),
            Listeners(None, None),
            None,
        )
        """
    )

    assert "jobqueue.entrypoints.worker.pool" in modules
    assert under(modules, HTTP_MIGRATIONS_AND_TRACING_SDK) == []


# --- the HTTP layer sees ports, not the settings or the concrete metrics ----------------

HTTP_DIR = Path(jobqueue.entrypoints.http.__file__).parent
NOT_FOR_HTTP = ("jobqueue.entrypoints.config.settings", "jobqueue.adapters.telemetry.metrics")


def imported_by(path: Path) -> set[str]:
    """Every module an import statement of `path` names, wherever the statement is."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("path", sorted(HTTP_DIR.glob("*.py")), ids=lambda path: path.name)
def test_http_modules_import_neither_the_settings_nor_the_concrete_metrics(path: Path) -> None:
    forbidden = [
        name
        for name in imported_by(path)
        if any(name == module or name.startswith(module + ".") for module in NOT_FOR_HTTP)
    ]

    assert forbidden == []
