"""Migration 0026 (counts shared by the jobs of a graph that wait for the same
dependencies, named by `jobs.wait_id`) on a filled `jobs` table while writes go on:
plain inserts, endings and deletes never wait for it longer than a short lock timeout,
either way. The counts of jobs made waiting under 0025 arrive unshared and release at
head; graphs inserted at head share their counts; the downgrade gives each job still
waiting on a shared count a count of that value and edges of its own, leaves no shared
count, takes the column and its index away and puts back 0025's functions exactly as
0025 made them, under which the former sharers are released or cancelled as before."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from uuid import UUID

import asyncpg

from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.migrations import upgrade
from jobqueue.adapters.postgres.schema import metadata
from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.dependencies import Step
from jobqueue.domain.job import NewJob
from tests.support.dependency_migrations import (
    _LIVE_EDGES,
    GRAPHS,
    _complete,
    _counts,
    _definitions,
    _edges,
    _graph,
    _insert,
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
    _job_columns,
    _job_indexes,
    _migrate_while_writing,
)
from tests.support.postgres import dsn

REVISION = "0026"
# Graphs inserted at head through the store (`Fan`), and how many jobs share each of a
# graph's two counts.
FANS = 10
SHARERS = 3
INDEX = "ix_jobs_wait_id"

_INDEX = (
    "SELECT i.indisvalid, i.indisready, pg_get_indexdef(i.indexrelid),"
    " pg_relation_size(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
    f" WHERE c.relname = '{INDEX}'"
)
_EDGES = "SELECT depends_on, job_id FROM job_dependencies"


@dataclass(frozen=True)
class Fan:
    """A graph inserted at head: two sets of jobs sharing a count, and one waiting alone."""

    root: UUID
    spread: tuple[UUID, ...]  # each waits for `root`: one count
    x: UUID
    y: UUID
    z: UUID
    # Each waits for x, y and z, the last run anyway: one count. They depend on `done`
    # too, a stored job completed before the graph: no count waits for it, no edge.
    gather: tuple[UUID, ...]
    done: UUID
    lone: UUID  # waits for `x` alone: a count of its own id

    @property
    def sharers(self) -> tuple[UUID, ...]:
        return (*self.spread, *self.gather)


def _new(kind: str, *, run_anyway: bool = False) -> NewJob:
    return NewJob.build(type=kind, max_attempts=1, run_anyway=run_anyway)


async def _fan(store: PostgresJobStore, done: UUID) -> Fan:
    last = SHARERS - 1
    steps = [
        Step(_new("root"), name="root"),
        *(Step(_new("spread"), after=("root",)) for _ in range(SHARERS)),
        *(Step(_new(name), name=name) for name in ("x", "y", "z")),
        *(
            Step(_new("gather", run_anyway=n == last), after=("x", "y", "z", str(done)))
            for n in range(SHARERS)
        ),
        Step(_new("lone"), after=("x",)),
    ]
    root, *ids = [each.job.id for each in await store.submit_graph(steps)]
    spread, (x, y, z), gather, (lone,) = (
        ids[:SHARERS],
        ids[SHARERS : SHARERS + 3],
        ids[SHARERS + 3 : -1],
        ids[-1:],
    )
    return Fan(root, tuple(spread), x, y, z, tuple(gather), done, lone)


async def _end(connection: asyncpg.Connection, ids: list[UUID], status: str) -> None:
    # One statement for them all, as `_complete`: its statement trigger counts them.
    await connection.execute(
        "UPDATE jobs SET status = $2, updated_at = now() WHERE id = ANY($1::uuid[])", ids, status
    )


async def _wait_ids(connection: asyncpg.Connection) -> dict[UUID, UUID | None]:
    """Each waiting job's `wait_id`: the count it shares, or None when it waits alone."""
    return await _pairs(connection, "SELECT id, wait_id FROM jobs WHERE status = 'waiting'")


async def _waiting(connection: asyncpg.Connection) -> set[UUID]:
    return {
        row[0] for row in await connection.fetch("SELECT id FROM jobs WHERE status = 'waiting'")
    }


async def _errors(connection: asyncpg.Connection, ids: list[UUID]) -> set[str | None]:
    rows = await connection.fetch(
        "SELECT DISTINCT last_error FROM jobs WHERE id = ANY($1::uuid[])", ids
    )
    return {row[0] for row in rows}


async def _functions(url: str) -> dict[str, str]:
    return (await _definitions(url))[1]


async def test_shared_counts_arrive_and_leave_on_a_filled_table_without_blocking_writes(
    empty_database_url: str,
) -> None:
    url = empty_database_url
    # 0025's functions, triggers, columns and indexes as 0025 itself made them, for the
    # downgrade to match.
    await asyncio.to_thread(upgrade, url, "0025")
    as_made = await _definitions(url)
    columns = await asyncio.to_thread(_job_columns, url)
    indexes = await asyncio.to_thread(_job_indexes, url)

    connection = await asyncpg.connect(dsn(url))
    try:
        ids = await _fill(connection)
        # Graphs made under 0025: each waiting job with a count of its own, written by
        # SQL as 0025's graph insert wrote it (the count from `waiting_for`).
        graphs = [await _graph(connection) for _ in range(GRAPHS)]
        await connection.execute(
            "INSERT INTO job_waits (job_id, remaining)"
            " SELECT id, waiting_for FROM jobs WHERE status = 'waiting'"
        )
        met, unmet = graphs[::2], graphs[1::2]
        await _complete(connection, [graph.second for graph in met])
        before = await _job_waits(connection)
        assert before == _counts(met, both=1) | _counts(unmet, both=2)

        up = await _migrate_while_writing(url, "upgrade", REVISION, ids, connection)
        assert await _version(url) == [(REVISION,)]
        # The counts untouched, none shared: every row is still its own job's.
        assert await _job_waits(connection) == before
        assert set((await _wait_ids(connection)).values()) == {None}
        assert await asyncio.to_thread(_job_columns, url) == columns | {"wait_id"}
        # Valid, ready, as declared, and holding no entry (no job has a `wait_id` yet).
        [(valid, ready, definition, size)] = await _fetch(url, _INDEX)
        assert (valid, ready, size) == (True, True, 8192)
        assert definition.endswith(
            "USING btree (wait_id) WHERE ((status = 'waiting'::text) AND (wait_id IS NOT NULL))"
        )
        functions = await _functions(url)
        assert set(functions) == set(as_made[1])
        for name in ("jobqueue_track_waiting", "jobqueue_count_noted"):
            assert functions[name] != as_made[1][name]
            assert "wait_id" in functions[name]
        assert (await _definitions(url))[0] == as_made[0]  # 0026 changes no trigger

        # The old per-job counts release at head: the met graphs' last dependencies end,
        # their waiting jobs are released; a chained job whose dependency then fails is
        # cancelled, one whose dependency completes is released.
        await _complete(connection, [graph.first for graph in met])
        assert await _statuses(connection, [g.both for g in met] + [g.one for g in met]) == {
            "pending"
        }
        assert await _statuses(connection, [graph.chained for graph in met]) == {"waiting"}
        released, failing = met[::2], met[1::2]
        await _complete(connection, [graph.one for graph in released])
        await _end(connection, [graph.one for graph in failing], "failed")
        assert await _statuses(connection, [graph.chained for graph in released]) == {"pending"}
        assert await _statuses(connection, [graph.chained for graph in failing]) == {"cancelled"}
        assert await _errors(connection, [graph.chained for graph in failing[:1]]) == {
            f"job {failing[0].one} it depends on ended failed"
        }
        assert await _job_waits(connection) == _counts(unmet, both=2)

        # At head, the store's graphs share their counts.
        engine = create_engine(url, pool_size=1)
        try:
            store = PostgresJobStore(engine)
            fans = [await _fan(store, await _insert(connection, "completed")) for _ in range(FANS)]
        finally:
            await engine.dispose()
        wait_ids = await _wait_ids(connection)
        shared: dict[UUID, tuple[UUID, UUID]] = {}  # each fan's two counts, by its root
        for fan in fans:
            spread, gather = wait_ids[fan.spread[0]], wait_ids[fan.gather[0]]
            assert spread is not None
            assert gather is not None
            assert [wait_ids[j] for j in fan.sharers] == [spread] * SHARERS + [gather] * SHARERS
            assert wait_ids[fan.lone] is None
            shared[fan.root] = (spread, gather)
        shared_ids = [each for pair in shared.values() for each in pair]
        assert len(set(shared_ids)) == 2 * FANS
        # A shared count's id is no job's.
        assert (
            await connection.fetchval(
                "SELECT count(*) FROM jobs WHERE id = ANY($1::uuid[])", shared_ids
            )
            == 0
        )
        # Three counts for each fan's seven waiting jobs, each starting from all its
        # dependencies; an edge per dependency of each count, none of a sharer's own id.
        fan_counts = {
            count: n
            for fan in fans
            for count, n in zip((*shared[fan.root], fan.lone), (1, 3, 1), strict=True)
        }
        assert await _job_waits(connection) == _counts(unmet, both=2) | fan_counts
        assert len(fan_counts) < len([j for fan in fans for j in (*fan.sharers, fan.lone)])
        fan_edges = await _edges(connection, _EDGES)
        for fan in fans:
            spread_id, gather_id = shared[fan.root]
            assert {edge for edge in fan_edges if edge[1] in (spread_id, gather_id, fan.lone)} == {
                (fan.root, spread_id),
                (fan.x, gather_id),
                (fan.y, gather_id),
                (fan.z, gather_id),
                (fan.x, fan.lone),
            }
        sharers = {j for fan in fans for j in fan.sharers}
        assert not [edge for edge in fan_edges if edge[1] in sharers]

        # Counted off at head: in the kept fans `y` completes; in the broken ones `x`
        # fails, cancelling the jobs sharing its count but the one run anyway (which keeps
        # the count) and the lone one. Each shared count is then 2, not the sharers'
        # `waiting_for` (3, written at release only): the downgrade must copy the count.
        kept, broken = fans[::2], fans[1::2]
        await _complete(connection, [fan.y for fan in kept])
        await _end(connection, [fan.x for fan in broken], "failed")
        cancelled = [j for fan in broken for j in (*fan.gather[:-1], fan.lone)]
        assert await _statuses(connection, cancelled) == {"cancelled"}
        assert await _errors(connection, [*broken[0].gather[:-1], broken[0].lone]) == {
            f"job {broken[0].x} it depends on ended failed"
        }
        # A cancel of all the jobs sharing a count takes the count with the last of them
        # (0026's `jobqueue_track_waiting`, by the row trigger of a top-level statement).
        await _end(connection, list(fans[0].spread), "cancelled")
        assert shared[fans[0].root][0] not in await _job_waits(connection)
        spreading = [j for fan in fans[1:] for j in fan.spread]
        gathering = [j for fan in kept for j in fan.gather] + [f.gather[-1] for f in broken]
        still = [*spreading, *gathering, *(fan.lone for fan in kept)]
        assert await _statuses(connection, still) == {"waiting"}
        before = await _job_waits(connection)
        assert {shared[fan.root][1]: before[shared[fan.root][1]] for fan in fans} == {
            shared[fan.root][1]: 2 for fan in fans
        }
        rows = await connection.fetch(
            "SELECT DISTINCT waiting_for FROM jobs WHERE id = ANY($1::uuid[])", gathering
        )
        assert [row[0] for row in rows] == [3]

        # What each waiting job waits on, and the edges, as the downgrade finds them.
        wait_ids = await _wait_ids(connection)
        edges = await _edges(connection, _EDGES)
        owned = {job: before[wait or job] for job, wait in wait_ids.items()}
        copied = {
            (dependency, job)
            for job, wait in wait_ids.items()
            if wait is not None
            for dependency, count in edges
            if count == wait
        }
        assert copied == {
            edge
            for fan in fans
            for edge in [
                *((fan.root, j) for j in fan.spread if j in spreading),
                *((d, j) for j in fan.gather if j in gathering for d in (fan.x, fan.y, fan.z)),
            ]
        }

        down = await _migrate_while_writing(url, "downgrade", "0025", ids, connection)
        assert await _version(url) == [("0025",)]
        # Each waiting job on a count of its own id with the value it waited on, shared or
        # not, and no other count: the shared ones are gone.
        assert await _waiting(connection) == set(wait_ids)
        after = await _job_waits(connection)
        assert after == owned
        assert set(shared_ids).isdisjoint(after)
        assert {j: after[j] for j in spreading} == dict.fromkeys(spreading, 1)
        assert {j: after[j] for j in gathering} == dict.fromkeys(gathering, 2)
        # The former sharers have their count's edges (the met ones too, as 0025 keeps
        # them for a retried dependency to count back on), among them one per live
        # dependency; no other edge changed (the shared counts' stay, counting nothing).
        assert await _edges(connection, _EDGES) == edges | copied
        live = await _edges(connection, _LIVE_EDGES)
        assert {edge for edge in live if edge[1] in sharers and edge[1] in wait_ids} <= copied
        # The column and its index gone, 0025's functions and triggers as 0025 made them.
        assert await asyncio.to_thread(_job_columns, url) == columns
        assert await asyncio.to_thread(_job_indexes, url) == indexes
        assert await _fetch(url, _INDEX) == []
        assert await _definitions(url) == as_made
        # 0025's `jobqueue_track_waiting` at work: a cancelled job's count goes with it.
        gone = spreading.pop()
        await _end(connection, [gone], "cancelled")
        assert gone not in await _job_waits(connection)

        # 0025 releases what the downgrade left waiting, from the counts made for it:
        # the spread jobs with their root, the kept fans' lone job with `x`; then `z`
        # fails, cancelling their gathering jobs but the one run anyway, now pending.
        await _complete(connection, [fan.root for fan in fans] + [fan.x for fan in kept])
        assert await _statuses(connection, spreading) == {"pending"}
        assert await _statuses(connection, [fan.lone for fan in kept]) == {"pending"}
        assert await _statuses(connection, [j for fan in kept for j in fan.gather]) == {"waiting"}
        await _end(connection, [fan.z for fan in kept], "failed")
        assert await _statuses(connection, [j for fan in kept for j in fan.gather[:-1]]) == {
            "cancelled"
        }
        assert await _errors(connection, list(kept[0].gather[:-1])) == {
            f"job {kept[0].z} it depends on ended failed"
        }
        assert await _statuses(connection, [fan.gather[-1] for fan in kept]) == {"pending"}
        # The broken fans' callback waits for the two left, counted off one by one.
        await _complete(connection, [fan.y for fan in broken])
        assert await _statuses(connection, [fan.gather[-1] for fan in broken]) == {"waiting"}
        await _complete(connection, [fan.z for fan in broken])
        assert await _statuses(connection, [fan.gather[-1] for fan in broken]) == {"pending"}
        # And the counts made under 0025, carried through both ways, release too.
        await _complete(connection, [g.first for g in unmet] + [g.second for g in unmet])
        assert await _statuses(connection, [g.both for g in unmet] + [g.one for g in unmet]) == {
            "pending"
        }
        await _complete(connection, [graph.one for graph in unmet])
        assert await _statuses(connection, [graph.chained for graph in unmet]) == {"pending"}
        assert await _waiting(connection) == set()
        assert await _job_waits(connection) == {}
        jobs = 5 * GRAPHS + (6 + 2 * SHARERS) * FANS
        total = FILLED_ROWS + jobs + up.inserted - up.deleted + down.inserted - down.deleted
        assert await connection.fetchval("SELECT count(*) FROM jobs") == total

        await asyncio.to_thread(upgrade, url)
        assert await _version(url) == [(HEAD,)]
        assert await connection.fetchval("SELECT count(*) FROM jobs WHERE wait_id IS NOT NULL") == 0
        assert await asyncio.to_thread(_drift, url, metadata) == []
    finally:
        await connection.close()
