"""A graph's jobs stored in one transaction (`domain/dependencies.py`): the stored jobs it
depends on locked and read, each job placed (waiting, or pending), the jobs inserted with
their ids, and the counts of the jobs that wait (`job_waits`: one per set of dependencies
still to be met, which the jobs waiting for the same ones share) with their edges.

Every way in that submits a job with dependencies comes here: `POST /jobs` and the batch
(through the store), `enqueue` and `enqueue_many` in a caller's transaction. A graph is
a workflow: it joins the workflow of the first stored job it depends on that is in one,
else it starts one (and its stored dependencies join it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from jobqueue.adapters.postgres.copy import json_text
from jobqueue.adapters.postgres.failures import refused_values, store_failures
from jobqueue.adapters.postgres.ids import time_ordered_ids
from jobqueue.adapters.postgres.queries.dependencies import (
    INSERT_EDGES,
    INSERT_WAITS,
    LOCK_DEPENDENCIES,
    MARK_DEPENDENCIES,
)
from jobqueue.adapters.postgres.queries.inserts import (
    GRAPH_COLUMNS,
    INSERT_GRAPH,
    INSERT_GRAPH_ANNOUNCED,
    SUBMITTED,
)
from jobqueue.domain.dependencies import (
    DependencyError,
    Placed,
    Step,
    Wait,
    check_keyless,
    link,
    place,
    waits_of,
)
from jobqueue.domain.ports import Submitted
from jobqueue.domain.status import Status


async def insert_graph(
    connection: AsyncConnection, steps: Sequence[Step], *, announce: bool = True
) -> list[Submitted]:
    """`steps` stored in `connection`'s transaction, all or none; raises a
    `DependencyError` (nothing stored) for a graph that cannot be."""
    for step in steps:
        check_keyless(step.new)
    *ids, new_workflow = time_ordered_ids(len(steps) + 1)
    linked = link(steps, ids)
    with store_failures(), refused_values():
        statuses: dict[UUID, Status] = {}
        workflow_id = new_workflow
        if linked.stored:
            locked = await connection.execute(
                LOCK_DEPENDENCIES.clause, {"ids": sorted(linked.stored)}
            )
            rows = {row.id: row for row in locked}
            statuses = {job_id: Status(row.status) for job_id, row in rows.items()}
            joined = [rows[i].workflow_id for i in linked.stored if i in rows]
            workflow_id = next((each for each in joined if each is not None), new_workflow)
        placed = place(linked, statuses)
        waits = _counted(waits_of(placed))
        if linked.stored:
            values = {"ids": list(linked.stored), "workflow_id": workflow_id}
            await connection.execute(MARK_DEPENDENCIES.clause, values)
        runnable = any(each.status is Status.PENDING for each in placed)
        statement = INSERT_GRAPH_ANNOUNCED if announce and runnable else INSERT_GRAPH
        rows_of = _values(placed, workflow_id, waits)
        inserted = await connection.execute(statement.clause, rows_of)
        stored_at = {row[0]: row[1] for row in inserted}
        if len(stored_at) != len(placed):
            # Only keys can conflict, and they were refused: an id made twice.
            raise DependencyError("a job of this graph was not stored; submit it again")
        if waits:
            edges = [
                (dependency, count)
                for count, wait in waits.items()
                for dependency in wait.dependencies
            ]
            dependencies, counts = zip(*edges, strict=True)
            linked_by = {"dependencies": list(dependencies), "dependents": list(counts)}
            await connection.execute(INSERT_EDGES.clause, linked_by)
            counted = {
                "ids": list(waits),
                "counts": [len(wait.dependencies) for wait in waits.values()],
            }
            await connection.execute(INSERT_WAITS.clause, counted)
    return [
        Submitted(
            replace(
                each.new.stored(each.id, stored_at[each.id]),
                status=each.status,
                workflow_id=workflow_id,
                waiting_for=each.waiting_for,
            ),
            replayed=False,
        )
        for each in placed
    ]


def _counted(waits: Sequence[Wait]) -> dict[UUID, Wait]:
    """Each wait by the id of its count in `job_waits`: its job's own when it waits alone,
    a new one when its jobs share it (their `wait_id`)."""
    shared = iter(time_ordered_ids(sum(wait.shared for wait in waits)))
    return {next(shared) if wait.shared else wait.jobs[0]: wait for wait in waits}


def _values(
    placed: Sequence[Placed], workflow_id: UUID, waits: dict[UUID, Wait]
) -> dict[str, list[Any]]:
    shared_by = {job: count for count, wait in waits.items() if wait.shared for job in wait.jobs}
    values: dict[str, list[Any]] = {"each_id": [each.id for each in placed]}
    for name in SUBMITTED:
        column = [getattr(each.new, name) for each in placed]
        if name == "payload":
            column = [json_text(value) for value in column]
        elif name == "unique_states":
            column = [None] * len(placed)
        values[f"each_{name}"] = column
    graph: dict[str, list[Any]] = {
        "depends_on": [_joined(each.new.depends_on) for each in placed],
        "run_anyway": [each.new.run_anyway for each in placed],
        "workflow_id": [workflow_id] * len(placed),
        "status": [each.status.value for each in placed],
        "waiting_for": [each.waiting_for for each in placed],
        "has_dependents": [each.has_dependents for each in placed],
        "wait_id": [shared_by.get(each.id) for each in placed],
    }
    values |= {f"each_{name}": graph[name] for name in GRAPH_COLUMNS}
    return values


def _joined(ids: tuple[UUID, ...] | None) -> str | None:
    # An array of arrays cannot be unnested by row: each job's ids travel joined.
    return None if not ids else ",".join(str(each) for each in ids)
