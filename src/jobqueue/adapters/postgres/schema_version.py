"""Whether a database's schema is already at the newest revision, known without Alembic.

Most processes start against a database that is already migrated. Importing Alembic and
having it load every revision to find that out costs a worker a few hundred milliseconds
of start-up, so the newest revisions are read from the revision files' own
`revision`/`down_revision` assignments, and compared with `alembic_version`. Only when they
differ (or the table is missing) does the caller run Alembic, which then decides
everything itself under its advisory lock.
"""

from __future__ import annotations

import ast
from pathlib import Path

import asyncpg

from jobqueue.adapters.postgres.database import driver_arguments

_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def migrations_dir() -> Path:
    """The revisions: the project's top-level `migrations/`, or the copy a built wheel
    carries as `jobqueue/_migrations`."""
    candidates = (_PACKAGE_ROOT / "_migrations", _PACKAGE_ROOT.parents[1] / "migrations")
    for candidate in candidates:
        if (candidate / "env.py").is_file():
            return candidate
    raise FileNotFoundError(
        "the jobqueue migrations were not found (looked in "
        + ", ".join(str(c) for c in candidates)
        + ")"
    )


def head_revisions(directory: Path | None = None) -> frozenset[str]:
    """The revisions no other revision builds on: what `alembic upgrade head` reaches."""
    revisions: set[str] = set()
    built_on: set[str] = set()
    for path in sorted(((directory or migrations_dir()) / "versions").glob("*.py")):
        assigned = _assignments(path)
        revision = assigned.get("revision")
        if not isinstance(revision, str):
            raise ValueError(f"{path.name} assigns no revision")
        revisions.add(revision)
        down = assigned.get("down_revision")
        if isinstance(down, str):
            built_on.add(down)
        elif isinstance(down, tuple | list):  # a merge revision
            built_on.update(str(each) for each in down)
    return frozenset(revisions - built_on)


def _assignments(path: Path) -> dict[str, object]:
    values: dict[str, object] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        target: ast.expr | None = None
        value: ast.expr | None = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        named = isinstance(target, ast.Name) and target.id in ("revision", "down_revision")
        if named and isinstance(target, ast.Name) and value is not None:
            values[target.id] = ast.literal_eval(value)
    return values


async def is_current(url: str, heads: frozenset[str] | None = None) -> bool:
    """Whether the database at `url` is at `heads` (the newest revisions by default).
    Any failure to tell says no: the caller then runs the migrations, which report it."""
    wanted = head_revisions() if heads is None else heads
    try:
        # No statement cache: through a pooler in transaction mode (PgBouncer) a named
        # prepared statement can meet another client's of the same name on a shared
        # server connection, and a failed read here would say the schema is behind.
        connection = await asyncpg.connect(
            timeout=10, statement_cache_size=0, **driver_arguments(url)
        )
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
        return False
    try:
        rows = await connection.fetch("SELECT version_num FROM alembic_version")
    except asyncpg.PostgresError:
        return False  # no alembic_version yet: never migrated
    finally:
        await connection.close()
    return frozenset(row["version_num"] for row in rows) == wanted
