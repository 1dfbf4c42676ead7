"""Query plans of the statements the store really sends, for the plan tests.

A statement is explained twice: as planned for the values given, and as the generic plan a
prepared statement may switch to after a few runs, which cannot see bound values (so a
status bound as a parameter would lose its partial index there). `rows_read` runs one
under EXPLAIN ANALYZE and counts the rows its scans of a table read: what a test bounds.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import pkgutil
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any
from uuid import UUID

from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres import queries
from jobqueue.adapters.postgres.database import create_engine
from jobqueue.adapters.postgres.driver import watch
from jobqueue.adapters.postgres.statement import Statement
from jobqueue.domain.status import TRAITS, Status
from tests.support.job_rows import seed_many


@contextmanager
def capture_statements(engine: AsyncEngine) -> Iterator[list[tuple[str, Sequence[Any]]]]:
    """The SQL text and parameters of every statement the engine sends meanwhile."""
    sent: list[tuple[str, Sequence[Any]]] = []

    def capture(*args: Any) -> None:
        _connection, _cursor, statement, parameters, _context, _many = args
        sent.append((statement, parameters))

    class Sent:
        # The hot path's statements go out on the driver, past SQLAlchemy's events.
        def sending(self, sql: str, arguments: Sequence[Any]) -> AbstractContextManager[object]:
            sent.append((sql, tuple(arguments)))
            return nullcontext()

    event.listen(engine.sync_engine, "before_cursor_execute", capture)
    unwatch = watch(engine, Sent())
    try:
        yield sent
    finally:
        unwatch()
        event.remove(engine.sync_engine, "before_cursor_execute", capture)


def sql_literal(value: object) -> str:
    # For EXECUTE's arguments only, and only with the store's own test-made values.
    if value is None:
        return "NULL"
    if isinstance(value, bool | int):
        return str(value)
    if isinstance(value, timedelta):
        return f"'{value.total_seconds()} seconds'"
    if isinstance(value, datetime):
        return f"'{value.isoformat()}'"
    if isinstance(value, str | UUID):
        return "'" + str(value).replace("'", "''") + "'"
    if isinstance(value, list):
        # An untyped array literal, which PostgreSQL coerces to the parameter's type.
        return "'{" + ",".join(_array_item(item) for item in value) + "}'"
    raise TypeError(f"no literal for {value!r}")


def _array_item(item: object) -> str:
    if item is None:
        return "NULL"
    if isinstance(item, bool | int | UUID):
        return str(item)
    if isinstance(item, timedelta):
        return f'"{item.total_seconds()} seconds"'
    if isinstance(item, datetime):
        return f'"{item.isoformat()}"'
    if isinstance(item, str):
        # Quoted as an array element (backslash-escaped), inside an SQL literal
        # (quotes doubled): JSON text holds both kinds of quote.
        escaped = item.replace("\\", "\\\\").replace('"', '\\"').replace("'", "''")
        return f'"{escaped}"'
    raise TypeError(f"no array literal for {item!r}")


async def custom_and_generic_plans(
    engine: AsyncEngine, statement: str, parameters: Sequence[Any]
) -> list[str]:
    """The plan for the given values, then the generic plan; nothing is executed."""
    async with engine.connect() as connection:
        custom = await connection.exec_driver_sql("EXPLAIN " + statement, tuple(parameters))
        await connection.exec_driver_sql("SET plan_cache_mode = force_generic_plan")
        await connection.exec_driver_sql("PREPARE explained AS " + statement)
        arguments = ", ".join(sql_literal(value) for value in parameters)
        call = f"explained({arguments})" if arguments else "explained"
        generic = await connection.exec_driver_sql(f"EXPLAIN EXECUTE {call}")
        plans = ["\n".join(row[0] for row in result) for result in (custom, generic)]
        # Session state outlives the transaction; the pooled connection is reused.
        await connection.exec_driver_sql("DEALLOCATE explained")
        await connection.exec_driver_sql("RESET plan_cache_mode")
        await connection.rollback()
    return plans


def uses_index(plan: str, index: str) -> bool:
    # The table is the index's name between its prefix and its first column.
    table = index.split("_")[1]
    return f"using {index} on {table}" in plan or f"Bitmap Index Scan on {index}" in plan


# Running jobs are in a second index of their own, by queue (a limited queue's slots);
# for a few rows the planner may read either.
_ALSO_HOLDING = {Status.PROCESSING: "ix_jobs_running_by_queue"}


def status_indexes(status: Status) -> set[str]:
    """The partial indexes that hold `status`'s rows alone."""
    also = _ALSO_HOLDING.get(status)
    return {TRAITS[status].index} | ({also} if also else set())


def reads_status_index(plan: str, status: Status) -> bool:
    """Whether `plan` reads a partial index that holds `status`'s rows alone."""
    return any(uses_index(plan, index) for index in status_indexes(status))


@dataclass(frozen=True, slots=True)
class RowsRead:
    """What one run of a statement read of a table, by EXPLAIN ANALYZE."""

    rows: int
    plan: str  # the plan as text, with the actual counts, for a failure's message


# Scans that read a table's rows or its index entries. A bitmap's index scan is left out:
# its heap scan counts the same rows again.
_SCANS = frozenset({"Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Heap Scan", "Tid Scan"})


async def rows_read(
    engine: AsyncEngine, statement: str, parameters: Sequence[Any] = (), *, table: str = "jobs"
) -> RowsRead:
    """Run `statement` (driver form, `$n` parameters) under EXPLAIN ANALYZE in a
    transaction rolled back afterwards, and count the rows its scans of `table` read:
    those each returned, and those its filters and rechecks threw away, over every loop
    and parallel worker."""
    async with engine.connect() as connection:
        explained = await connection.exec_driver_sql(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + statement, tuple(parameters)
        )
        (document,) = explained.one()
        text_plan = await connection.exec_driver_sql(
            "EXPLAIN (ANALYZE) " + statement, tuple(parameters)
        )
        await connection.rollback()
    plans = json.loads(document) if isinstance(document, str) else document
    rows = 0.0
    nodes = [plans[0]["Plan"]]
    while nodes:
        node = nodes.pop()
        nodes += node.get("Plans", [])
        if node["Node Type"] in _SCANS and node.get("Relation Name") == table:
            loops = node["Actual Loops"]
            thrown = node.get("Rows Removed by Filter", 0)
            thrown += node.get("Rows Removed by Index Recheck", 0)
            rows += (node["Actual Rows"] + thrown) * loops
    return RowsRead(round(rows), "\n".join(row[0] for row in text_plan))


async def statement_rows_read(
    engine: AsyncEngine, statement: Statement, values: Mapping[str, Any], *, table: str = "jobs"
) -> RowsRead:
    """`rows_read` of a named statement (`adapters/postgres/queries/`) with `values`."""
    return await rows_read(engine, statement.numbered, statement.arguments(values), table=table)


@cache
def statement_names() -> Mapping[str, str]:
    """The name of every statement declared in `adapters/postgres/queries/`, by its text as
    the driver sends it: to say which statement a captured one is."""
    names = {}
    for module_info in pkgutil.iter_modules(queries.__path__):
        module = importlib.import_module(f"{queries.__name__}.{module_info.name}")
        for value in vars(module).values():
            if isinstance(value, Statement):
                names[value.numbered] = value.name
    return names


FINISHED_ROWS = 200_000


def fill_table(
    database_url: str, history: Sequence[tuple[str, int, int]], *, scheduled: int = 0
) -> None:
    """Seed `jobs` for plan tests: for each (status, rows, spacing) `rows` jobs of type
    'done' finished `spacing` seconds apart going back from now, `scheduled` pending jobs
    of type 'later' due from an hour ahead on, then 20 pending, 20 processing and 20 waiting jobs,
    then ANALYZE, so the planner sees the real proportions."""

    async def seed() -> None:
        engine = create_engine(database_url, pool_size=1)
        try:
            async with engine.begin() as connection:
                for status, rows, spacing in history:
                    await connection.execute(
                        text(
                            "INSERT INTO jobs (type, status, attempts, max_attempts, run_at,"
                            "                  updated_at)"
                            " SELECT 'done', :status, 1, 3, now() - make_interval(secs => n),"
                            "        now() - make_interval(secs => n * :spacing)"
                            " FROM generate_series(1, :rows) AS n"
                        ),
                        {"status": status, "rows": rows, "spacing": spacing},
                    )
                await connection.execute(
                    text(
                        "INSERT INTO jobs (type, max_attempts, run_at)"
                        " SELECT 'later', 3, now() + interval '1 hour' + make_interval(secs => n)"
                        " FROM generate_series(1, :rows) AS n"
                    ),
                    {"rows": scheduled},
                )
            await seed_many(engine, 20, Status.PENDING)
            await seed_many(engine, 20, Status.PROCESSING)
            async with engine.begin() as connection:
                # Waiting for a job that is no more: only their status matters here.
                await connection.execute(
                    text(
                        "INSERT INTO jobs (type, status, waiting_for, max_attempts)"
                        " SELECT 'done', 'waiting', 1, 3 FROM generate_series(1, 20)"
                    )
                )
            async with engine.connect() as connection:
                await connection.execute(text("ANALYZE jobs"))
                await connection.commit()
        finally:
            await engine.dispose()

    asyncio.run(seed())


async def analyze(engine: AsyncEngine) -> None:
    """`ANALYZE jobs`, so that the planner sees the rows a test just wrote or removed."""
    async with engine.connect() as connection:
        await connection.execute(text("ANALYZE jobs"))
        await connection.commit()
