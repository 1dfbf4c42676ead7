"""What the tests of the dependency migrations (0024 on) share: the triggers 0023 and
0024 leave on `jobs`, a job of a status (and other columns) inserted by SQL, graphs of
waiting jobs written by SQL as 0024 writes them and ended together, and what is read back
of them: statuses, counts, edges, and the triggers and functions of ours."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

import asyncpg

from tests.support.migrating import _fetch, _triggers

TRIGGERS_0023 = {"jobs_announce_ending", "jobs_announce_deleted"}
TRIGGERS_0024 = TRIGGERS_0023 | {"jobs_note_ending", "jobs_note_deleted", "jobs_release_dependents"}


async def _insert(connection: asyncpg.Connection, status: str, **columns: Any) -> UUID:
    names = ", ".join(["type", "max_attempts", "status", *columns])
    places = ", ".join(f"${n}" for n in range(1, len(columns) + 4))
    job_id: UUID = await connection.fetchval(
        f"INSERT INTO jobs ({names}) VALUES ({places}) RETURNING id",
        "d",
        3,
        status,
        *columns.values(),
    )
    return job_id


# Graphs made under 0024; in every other one a dependency has already ended by then.
GRAPHS = 100
_LIVE = "('waiting', 'pending', 'processing')"

_FUNCTION_DEFINITIONS = (
    "SELECT proname, pg_get_functiondef(oid) FROM pg_proc WHERE proname LIKE 'jobqueue_%'"
)
# Each edge a job's `depends_on` implies whose dependency is still live: what 0024 keeps.
_LIVE_EDGES = f"""
SELECT dependency.id, job.id FROM jobs AS job
CROSS JOIN LATERAL unnest(job.depends_on) AS edge (id)
JOIN jobs AS dependency ON dependency.id = edge.id
WHERE job.depends_on IS NOT NULL AND dependency.status IN {_LIVE}
"""


@dataclass(frozen=True)
class Graph:
    first: UUID
    second: UUID
    both: UUID  # waits for `first` and `second`
    one: UUID  # waits for `first`
    chained: UUID  # waits for `one`, itself waiting


async def _waiting(connection: asyncpg.Connection, *dependencies: UUID) -> UUID:
    """A job waiting for `dependencies` (all live) and its edges, written by SQL as a
    graph's insert writes them under 0024."""
    await connection.execute(
        "UPDATE jobs SET has_dependents = true WHERE id = ANY($1::uuid[])", list(dependencies)
    )
    job_id = await _insert(
        connection, "waiting", depends_on=list(dependencies), waiting_for=len(dependencies)
    )
    await connection.executemany(
        "INSERT INTO job_dependencies VALUES ($1, $2)", [(each, job_id) for each in dependencies]
    )
    return job_id


async def _graph(connection: asyncpg.Connection) -> Graph:
    first = await _insert(connection, "pending")
    second = await _insert(connection, "pending")
    one = await _waiting(connection, first)
    return Graph(
        first=first,
        second=second,
        both=await _waiting(connection, first, second),
        one=one,
        chained=await _waiting(connection, one),
    )


async def _complete(connection: asyncpg.Connection, ids: list[UUID]) -> None:
    # One statement for them all: its statement trigger counts them together.
    await connection.execute(
        "UPDATE jobs SET status = 'completed', updated_at = now() WHERE id = ANY($1::uuid[])", ids
    )


async def _statuses(connection: asyncpg.Connection, ids: list[UUID]) -> set[str]:
    rows = await connection.fetch(
        "SELECT DISTINCT status FROM jobs WHERE id = ANY($1::uuid[])", ids
    )
    return {row["status"] for row in rows}


async def _pairs(connection: asyncpg.Connection, query: str) -> dict[Any, Any]:
    return {row[0]: row[1] for row in await connection.fetch(query)}


async def _job_waits(connection: asyncpg.Connection) -> dict[UUID, int]:
    return await _pairs(connection, "SELECT job_id, remaining FROM job_waits")


async def _edges(connection: asyncpg.Connection, query: str) -> set[tuple[UUID, UUID]]:
    return {(row[0], row[1]) for row in await connection.fetch(query)}


async def _definitions(url: str) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """The triggers on `jobs` and the functions of ours, as the database holds them."""
    return await _triggers(url), dict(await _fetch(url, _FUNCTION_DEFINITIONS))


async def _version(url: str) -> list[Any]:
    return await _fetch(url, "SELECT version_num FROM alembic_version")


def _counts(graphs: list[Graph], both: int) -> dict[UUID, int]:
    """What each of `graphs`' waiting jobs waits for: `both` for the one with two."""
    counts: dict[UUID, int] = {}
    for graph in graphs:
        counts |= {graph.both: both, graph.one: 1, graph.chained: 1}
    return counts
