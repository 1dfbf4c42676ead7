"""The hot path's plans with many finished rows: the partial indexes, never a Seq Scan.

The statements explained are the ones the store sends, captured from its engine. Each is
explained twice: as planned for the values given, and as the generic plan a prepared
statement may switch to after a few runs, which cannot see bound values (so a status
bound as a parameter would lose the partial index there).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from uuid import uuid4

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.bulk import Selection
from jobqueue.domain.errors import JobNotFound
from jobqueue.domain.job import Lease, NewJob
from jobqueue.domain.outcome import Decision
from jobqueue.domain.progress import Progress
from jobqueue.domain.status import Status
from jobqueue.domain.transitions import Operation
from jobqueue.domain.unique import Unique
from tests.support.plans import (
    FINISHED_ROWS,
    analyze,
    capture_statements,
    custom_and_generic_plans,
    fill_table,
    reads_status_index,
    uses_index,
)

StoreCall = Callable[[PostgresJobStore], Awaitable[object]]
# The types of the process whose claims are explained: those `fill_table` seeds.
PROCESS_TYPES = frozenset({"bulk", "done", "later"})


async def _record_many_unknown(store: PostgresJobStore) -> None:
    # One ending of every kind in one batch, as the pool's writer sends them.
    report = Progress.build(0.5, message="half")
    decisions = [
        Decision.complete(),
        Decision.complete('{"rows": 3}').with_progress(report),
        Decision.backoff(timedelta(seconds=1), "flaky"),
        Decision.fail("bad input"),
        Decision.dead_letter("gave up"),
        Decision.release(),
        Decision.snooze(timedelta(minutes=1)),
    ]
    endings = [(Lease(uuid4(), 1), decision) for decision in decisions for _ in range(2)]
    assert await store.record_many(endings) == set()


async def _record_and_claim_unknown(store: PostgresJobStore) -> None:
    endings = [(Lease(uuid4(), 1), Decision.complete()) for _ in range(8)]
    held, _ = await store.record_and_claim(endings, 5, timedelta(minutes=5), types=PROCESS_TYPES)
    assert held == set()


async def _progress_unknown(store: PostgresJobStore) -> None:
    reports = [(Lease(uuid4(), 1), Progress.build(done=n, total=8)) for n in range(8)]
    assert await store.record_progress(reports) == set()


async def _renew_unknown(store: PostgresJobStore) -> None:
    leases = [Lease(uuid4(), 1) for _ in range(8)]
    assert await store.renew(leases, timedelta(seconds=30)) == set()


# The indexes each statement must use. A batch of endings or renewals is looked up by
# key: were it found by scanning the lease index instead (cheaper while few jobs are
# processing), a transaction holding the xmin horizon would make every batch read an
# entry per job processed since it began. A claim probes pk_queues once, for a pause.
HOT_PATH: dict[str, tuple[StoreCall, tuple[str, ...]]] = {
    "claim": (
        lambda store: store.claim(5, timedelta(minutes=5), types=PROCESS_TYPES),
        ("ix_jobs_due_by_type", "pk_queues"),
    ),
    "recover": (lambda store: store.recover_expired(5), ("ix_jobs_lease_expiry",)),
    "record_many": (_record_many_unknown, ("pk_jobs",)),
    # Its endings are record_many's, its claim the claim's: each keeps its index.
    "record_and_claim": (
        _record_and_claim_unknown,
        ("ix_jobs_due_by_type", "pk_jobs", "pk_queues"),
    ),
    "renew": (_renew_unknown, ("pk_jobs",)),
    "progress": (_progress_unknown, ("pk_jobs",)),
    # A waiter's mark: the job by key, whatever its status.
    "watch": (lambda store: store.watch(uuid4()), ("pk_jobs",)),
}


# Running jobs of a busy fleet, for the hot path's plans.
RUNNING = 2_000


@pytest.fixture(scope="module")
def big_table(database_url: str) -> str:
    """This module's database holding many finished jobs and a few live ones."""
    fill_table(database_url, [("completed", FINISHED_ROWS, 1)])
    return database_url


async def test_hot_path_uses_its_index_among_many_finished_rows(plan_engine: AsyncEngine) -> None:
    # One test for all the statements: the table is filled once per xdist worker. A busy
    # fleet's running jobs, none expired, seeded here whatever this module's other tests
    # did to the table's few (its bulk test cancels them): among a handful, recovery's
    # scan of `ix_jobs_running_by_queue` whole and sorted cost the planner about what
    # the lease index's range did, and it once chose it in CI.
    async with plan_engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO jobs (type, status, attempts, max_attempts, locked_until)"
                " SELECT 'running', 'processing', 1, 3, now() + interval '1 hour'"
                " FROM generate_series(1, :rows)"
            ),
            {"rows": RUNNING},
        )
    await analyze(plan_engine)
    try:
        for operation, (call, indexes) in HOT_PATH.items():
            with capture_statements(plan_engine) as sent:
                await call(PostgresJobStore(plan_engine))
            [(statement, parameters)] = [(s, p) for s, p in sent if "jobs" in s]

            for plan in await custom_and_generic_plans(plan_engine, statement, parameters):
                assert all(uses_index(plan, index) for index in indexes), f"{operation}:\n{plan}"
                assert "Seq Scan on jobs" not in plan, f"{operation}:\n{plan}"
    finally:
        async with plan_engine.begin() as connection:
            await connection.execute(text("DELETE FROM jobs WHERE type = 'running'"))
        await analyze(plan_engine)


# An operator's bulk calls: each reads its status's index in the order jobs ended, never
# the table, however many finished jobs it holds.
BULK: dict[str, tuple[StoreCall, Status]] = {
    "retry dead letters": (
        lambda store: store.retry_many(Selection(Status.DEAD_LETTER, queue="q", type="t")),
        Status.DEAD_LETTER,
    ),
    "retry failed": (lambda store: store.retry_many(Selection(Status.FAILED)), Status.FAILED),
    "discard": (lambda store: store.discard_many(Selection(Status.FAILED)), Status.FAILED),
    "retry cancelled": (
        lambda store: store.retry_many(Selection(Status.CANCELLED, type="t")),
        Status.CANCELLED,
    ),
    "cancel pending": (
        lambda store: store.cancel_many(
            Selection(Status.PENDING, queue="q", operation=Operation.CANCEL)
        ),
        Status.PENDING,
    ),
    "cancel running": (
        lambda store: store.cancel_many(Selection(Status.PROCESSING, operation=Operation.CANCEL)),
        Status.PROCESSING,
    ),
}


async def test_bulk_calls_read_their_status_index_among_many_finished_rows(
    plan_engine: AsyncEngine,
) -> None:
    for name, (call, status) in BULK.items():
        with capture_statements(plan_engine) as sent:
            await call(PostgresJobStore(plan_engine))
        [(statement, parameters)] = [(s, p) for s, p in sent if "jobs" in s]

        for plan in await custom_and_generic_plans(plan_engine, statement, parameters):
            assert reads_status_index(plan, status), f"{name}:\n{plan}"
            assert "Seq Scan on jobs" not in plan, f"{name}:\n{plan}"


async def test_a_cancel_looks_its_job_up_by_key(plan_engine: AsyncEngine) -> None:
    with capture_statements(plan_engine) as sent, pytest.raises(JobNotFound):
        await PostgresJobStore(plan_engine).cancel(uuid4())
    # The cancel, then the read that explains why it matched nothing.
    (statement, parameters), _ = [(s, p) for s, p in sent if "jobs" in s]

    for plan in await custom_and_generic_plans(plan_engine, statement, parameters):
        assert uses_index(plan, "pk_jobs"), plan
        assert "Seq Scan on jobs" not in plan, plan


async def test_a_duplicate_is_found_by_the_unique_index(plan_engine: AsyncEngine) -> None:
    store = PostgresJobStore(plan_engine)
    new = NewJob.build(type="uniq", max_attempts=3, unique=Unique(key="plan-check"))
    await store.submit(new)
    with capture_statements(plan_engine) as sent:
        assert (await store.submit(new)).duplicate
    # The insert that met the conflict, then the read of the job holding the key.
    lookup = [(s, p) for s, p in sent if s.lstrip().upper().startswith("SELECT")]
    (statement, parameters) = lookup[-1]

    for plan in await custom_and_generic_plans(plan_engine, statement, parameters):
        assert uses_index(plan, "uq_jobs_unique_key"), plan
        assert "Seq Scan on jobs" not in plan, plan
