"""Migration 0025 (dependencies counted in `job_waits`, edges kept until their dependency
is deleted) on a filled `jobs` table while writes go on: plain inserts, endings and
deletes never wait for it longer than a short lock timeout; each waiting job's count
arrives as 0024 left it and releases it at head; the downgrade hands the counts back to
`waiting_for`, drops the met edges of waiting jobs and puts back 0024's functions and triggers
exactly as 0024 made them, under which releasing still works."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import asyncpg

from jobqueue.adapters.postgres.migrations import downgrade, upgrade
from jobqueue.adapters.postgres.schema import metadata
from tests.support.dependency_migrations import TRIGGERS_0024, _insert
from tests.support.migrating import (
    FILLED_ROWS,
    HEAD,
    _drift,
    _fetch,
    _fill,
    _migrate_while_writing,
    _triggers,
)
from tests.support.postgres import dsn

# Graphs made under 0024; in every other one a dependency has already ended by then.
GRAPHS = 100
TRIGGERS_0025 = TRIGGERS_0024 | {"jobs_wait_changed", "jobs_wait_deleted"}
FUNCTIONS_0025 = {
    "jobqueue_count_noted",
    "jobqueue_note_change",
    "jobqueue_release_counted",
    "jobqueue_track_waiting",
}
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


async def _waiting_for(connection: asyncpg.Connection) -> dict[UUID, int]:
    return await _pairs(connection, "SELECT id, waiting_for FROM jobs WHERE status = 'waiting'")


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


async def test_dependency_counts_arrive_on_a_filled_table_without_blocking_writes(
    empty_database_url: str,
) -> None:
    url = empty_database_url
    # 0024's triggers and functions as 0024 itself made them, for the downgrades to match.
    await asyncio.to_thread(upgrade, url, "0024")
    as_made = await _definitions(url)
    await asyncio.to_thread(upgrade, url)
    await asyncio.to_thread(downgrade, url, "0024")
    assert await _definitions(url) == as_made

    connection = await asyncpg.connect(dsn(url))
    try:
        ids = await _fill(connection)
        graphs = [await _graph(connection) for _ in range(GRAPHS)]
        met, unmet = graphs[::2], graphs[1::2]
        # Counted off under 0024, which deletes the edges it met.
        await _complete(connection, [graph.second for graph in met])
        before = await _waiting_for(connection)
        assert before == _counts(met, both=1) | _counts(unmet, both=2)
        assert await _edges(connection, "SELECT * FROM job_dependencies") == await _edges(
            connection, _LIVE_EDGES
        )

        up = await _migrate_while_writing(url, "upgrade", "head", ids, connection)
        assert await _version(url) == [(HEAD,)]
        # A row per waiting job, no other, its count 0024's.
        assert await _job_waits(connection) == before
        assert set(await _triggers(url)) == TRIGGERS_0025
        functions = {name for name, _ in await _fetch(url, _FUNCTION_DEFINITIONS)}
        assert functions >= FUNCTIONS_0025
        assert await asyncio.to_thread(_drift, url, metadata) == []

        # The met graphs' last dependencies end: their waiting jobs are released, and
        # then the chained ones, each leaving `job_waits` as it stops waiting.
        await _complete(connection, [graph.first for graph in met])
        assert await _statuses(connection, [g.both for g in met] + [g.one for g in met]) == {
            "pending"
        }
        assert await _statuses(connection, [graph.chained for graph in met]) == {"waiting"}
        await _complete(connection, [graph.one for graph in met])
        assert await _statuses(connection, [graph.chained for graph in met]) == {"pending"}
        assert await _job_waits(connection) == _counts(unmet, both=2)
        # A count taken off at head lives in `job_waits` only (the `jobs` row is written
        # at release), and the edge it met stays, as the edges of the met graphs do.
        await _complete(connection, [graph.second for graph in unmet])
        counted = await _job_waits(connection)
        assert counted == _counts(unmet, both=1)
        assert await _waiting_for(connection) == _counts(unmet, both=2)
        kept = await _edges(connection, "SELECT * FROM job_dependencies")
        assert {(graph.second, graph.both) for graph in unmet} <= kept
        assert {(graph.first, graph.both) for graph in met} <= kept

        down = await _migrate_while_writing(url, "downgrade", "0024", ids, connection)
        assert await _version(url) == [("0024",)]
        assert await _waiting_for(connection) == counted
        # A waiting job keeps only the edges still to be met, as 0024 keeps them; the
        # met edges of jobs no longer waiting stay (0024 counts off waiting jobs only).
        edges = await _edges(connection, "SELECT * FROM job_dependencies")
        waiting = {graph.both for graph in unmet} | {graph.chained for graph in unmet}
        live = await _edges(connection, _LIVE_EDGES)
        assert {edge for edge in edges if edge[1] in waiting} == {
            edge for edge in live if edge[1] in waiting
        }
        assert {edge for edge in edges if edge[1] in waiting} == {
            edge
            for graph in unmet
            for edge in [(graph.first, graph.both), (graph.one, graph.chained)]
        }
        assert {(graph.second, graph.both) for graph in unmet}.isdisjoint(edges)
        assert {(graph.first, graph.both) for graph in met} <= edges
        assert await connection.fetchval("SELECT to_regclass('job_waits')") is None
        assert await _definitions(url) == as_made
        assert set(as_made[0]) == TRIGGERS_0024
        assert FUNCTIONS_0025.isdisjoint(as_made[1])

        # 0024 releases what the downgrade left waiting, from the counts handed back.
        await _complete(connection, [graph.first for graph in unmet])
        assert await _statuses(connection, [g.both for g in unmet] + [g.one for g in unmet]) == {
            "pending"
        }
        assert await _waiting_for(connection) == {graph.chained: 1 for graph in unmet}
        await _complete(connection, [graph.one for graph in unmet])
        assert await _waiting_for(connection) == {}
        # What 0024 met is gone; the met graphs' edges, left by the downgrade, stay.
        assert await _edges(connection, "SELECT * FROM job_dependencies") == {
            edge
            for graph in met
            for edge in [
                (graph.first, graph.both),
                (graph.first, graph.one),
                (graph.one, graph.chained),
            ]
        }
        total = FILLED_ROWS + 5 * GRAPHS + up.inserted - up.deleted + down.inserted - down.deleted
        assert await connection.fetchval("SELECT count(*) FROM jobs") == total

        await asyncio.to_thread(upgrade, url)
        assert await _version(url) == [(HEAD,)]
        assert await _job_waits(connection) == {}
        assert await asyncio.to_thread(_drift, url, metadata) == []
    finally:
        await connection.close()
