"""Migration 0025 (dependencies counted in `job_waits`, edges kept until their dependency
is deleted) on a filled `jobs` table while writes go on: plain inserts, endings and
deletes never wait for it longer than a short lock timeout; each waiting job's count
arrives as 0024 left it and releases it at head; the downgrade hands the counts back to
`waiting_for`, drops the met edges of waiting jobs and puts back 0024's functions and triggers
exactly as 0024 made them, under which releasing still works."""

from __future__ import annotations

import asyncio
from uuid import UUID

import asyncpg

from jobqueue.adapters.postgres.migrations import downgrade, upgrade
from jobqueue.adapters.postgres.schema import metadata
from tests.support.dependency_migrations import (
    _FUNCTION_DEFINITIONS,
    _LIVE_EDGES,
    GRAPHS,
    TRIGGERS_0024,
    _complete,
    _counts,
    _definitions,
    _edges,
    _graph,
    _job_waits,
    _pairs,
    _statuses,
    _version,
)
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

TRIGGERS_0025 = TRIGGERS_0024 | {"jobs_wait_changed", "jobs_wait_deleted"}
FUNCTIONS_0025 = {
    "jobqueue_count_noted",
    "jobqueue_note_change",
    "jobqueue_release_counted",
    "jobqueue_track_waiting",
}


async def _waiting_for(connection: asyncpg.Connection) -> dict[UUID, int]:
    return await _pairs(connection, "SELECT id, waiting_for FROM jobs WHERE status = 'waiting'")


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
