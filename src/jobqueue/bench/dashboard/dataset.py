"""The dashboard bench's table: many finished jobs and many pending ones, over many queues
and types, as a service that has run for a week leaves it; and whether a database already
holds exactly that table, so a re-run skips the minutes of filling.

Rows are made by PostgreSQL (`INSERT … SELECT` over `generate_series`), a chunk per
statement so the progress line moves; ids are time-ordered like the service's own
(`adapters/postgres/ids.py`), so the primary key grows at its right edge as it would in
production, and a job's id, created_at and updated_at agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.bench.dashboard.pages import Samples
from jobqueue.bench.progress import progress
from jobqueue.domain.status import Status

# The database the table is kept in between runs (filling takes minutes); never the
# service's own.
DATABASE = "jobqueue_dashboard_bench"
# Rows per INSERT: big enough that statement overhead is nothing, small enough that the
# progress line moves every few seconds.
_CHUNK = 250_000
# Where a filled table says what it holds; its row is written last, so a fill that was
# interrupted is never taken for a finished one.
_MARKER = "bench_dashboard_fill"


@dataclass(frozen=True, slots=True)
class Dataset:
    """What the table holds: `finished` ended jobs (completed, failed, cancelled) and dead
    letters over the last `days`, and `pending` ones (a share scheduled for later), over
    `queues` queues and `types` types, a few of each skewed to be most of the traffic."""

    finished: int
    pending: int
    queues: int = 20
    types: int = 30
    days: int = 7
    # Jobs running now, leases held far ahead (nothing recovers them during a run).
    processing: int = 200
    # Live worker processes in the registry, expiring far ahead.
    workers: int = 4
    # Workflows, each a pending root and the jobs waiting for it (`WORKFLOW_SIZE` in all).
    workflows: int = 20

    def describe(self) -> str:
        return (
            f"{self.finished:,} finished and {self.pending:,} pending jobs, {self.processing:,} "
            f"running, {self.workflows:,} workflows of {WORKFLOW_SIZE} jobs, over "
            f"{self.queues} queues and {self.types} types, {self.days} days"
        )


# The finished mix: shares of the rows ending each way (the rest completed).
FAILED_SHARE = 0.04
DEAD_LETTER_SHARE = 0.02
CANCELLED_SHARE = 0.02
# Of pending jobs, the share scheduled for later (the rest due, waiting for a worker).
SCHEDULED_SHARE = 0.3
# Of every job, the share with an idempotency key, and the share with a unique key.
KEYED_SHARE = 0.05
# The jobs of one workflow: a root, and the steps waiting for it.
WORKFLOW_SIZE = 50

_ERRORS = (
    "ValueError: order {n} could not be charged: card declined",
    "TimeoutError: upstream did not answer within 30s",
    "ConnectionError: connection reset by peer (api.example.com, port 443)",
    "KeyError: 'customer_id' missing from payload of job {n}",
    "RuntimeError: <script>alert('payloads and errors are user data')</script>",
)


def _chosen(values: list[str], index: str) -> str:
    # A literal array, and 1-based subscripts: `index` is an expression of small ints.
    listed = ", ".join("'" + value.replace("'", "''") + "'" for value in values)
    return f"(ARRAY[{listed}])[1 + {index}]"


def type_names(count: int) -> list[str]:
    """`count` job type names, as applications name theirs (`email.send`, …)."""
    nouns = ["email", "invoice", "report", "image", "webhook", "sync", "export", "import"]
    verbs = ["send", "build", "render", "retry", "notify"]
    return [
        f"{nouns[i % len(nouns)]}.{verbs[(i // len(nouns)) % len(verbs)]}"
        + ("" if i < len(nouns) * len(verbs) else f"-{i}")
        for i in range(count)
    ]


def queue_names(count: int) -> list[str]:
    return ["default", *(f"queue-{i:02d}" for i in range(1, count))]


def _columns(dataset: Dataset, kind: str) -> str:
    """The columns every generated row shares, from `g` (n, created, r, s, q, t); `kind`
    keeps the keys and ids of one statement's rows apart from another's."""
    queue = _chosen(queue_names(dataset.queues), "q")
    job_type = _chosen(type_names(dataset.types), "t")
    error = _chosen([e.replace("{n}", "#") for e in _ERRORS], "(n % 5)::int")
    return f"""
        n, created,
        (lpad(to_hex((extract(epoch FROM created) * 1000)::bigint), 12, '0') || '7'
            || substr(md5('{kind}' || n), 1, 19))::uuid AS id,
        {queue} AS queue, {job_type} AS type,
        CASE WHEN s < 0.9 THEN 0 ELSE (n % 10)::int END AS priority,
        jsonb_build_object('order_id', n, 'customer', 'c-' || (n % 9973),
                           'amount', (n % 100000) / 100.0, 'tags', jsonb_build_array('a', 'b'))
            AS payload,
        replace({error}, '#', n::text) AS error,
        CASE WHEN s < {KEYED_SHARE} THEN 'idem-{kind}-' || n END AS idempotency_key,
        CASE WHEN s >= {KEYED_SHARE} AND s < {2 * KEYED_SHARE} THEN 'uniq-{kind}-' || n END
            AS unique_key,
        'worker-' || (n % 4) || ':' || (1000 + n % 8) AS worker
    """


# The bounds of a chunk's rows, bound per statement.
_CHUNK_ROWS = "CAST(:first AS int), CAST(:last AS int)"


def _generated(dataset: Dataset, created: str, rows: str = _CHUNK_ROWS) -> str:
    # Queues and types skewed as real traffic is (a few carry most of it): the square of
    # a uniform draw favours the low indexes.
    return f"""
        SELECT n, {created} AS created, random() AS r, random() AS s,
            floor(power(random(), 2) * {dataset.queues})::int AS q,
            floor(power(random(), 2) * {dataset.types})::int AS t
        FROM generate_series({rows}) AS n
    """


def _finished_rows(dataset: Dataset) -> str:
    spacing = dataset.days * 86400 / max(dataset.finished, 1)
    created = f"now() - make_interval(secs => (CAST(:total AS int) - n) * {spacing})"
    failed = FAILED_SHARE
    dead = failed + DEAD_LETTER_SHARE
    cancelled = dead + CANCELLED_SHARE
    return f"""
    INSERT INTO jobs (id, queue, type, priority, payload, status, attempts, max_attempts,
                      run_at, last_error, idempotency_key, unique_key, unique_states,
                      attempt_log, started_at, worker, created_at, updated_at)
    SELECT id, queue, type, priority, payload, status,
        CASE status WHEN 'dead_letter' THEN 3 WHEN 'cancelled' THEN 0
                    ELSE 1 + (retried::int) END,
        3, created,
        CASE WHEN status IN ('failed', 'dead_letter') THEN error END,
        idempotency_key, unique_key,
        CASE WHEN unique_key IS NOT NULL THEN ARRAY['pending', 'processing'] END,
        CASE WHEN status = 'dead_letter' OR retried THEN jsonb_build_array(
            jsonb_build_object('attempt', 1, 'outcome', 'retried', 'error', error,
                               'started_at', to_jsonb(created),
                               'finished_at', to_jsonb(created + interval '1 second'),
                               'worker', worker)) END,
        CASE WHEN status <> 'cancelled' THEN ended - interval '2 seconds' END,
        CASE WHEN status <> 'cancelled' THEN worker END,
        created, ended
    FROM (
        SELECT {_columns(dataset, "f")},
            CASE WHEN r < {failed} THEN 'failed' WHEN r < {dead} THEN 'dead_letter'
                 WHEN r < {cancelled} THEN 'cancelled' ELSE 'completed' END AS status,
            r >= {cancelled} AND s > 0.97 AS retried,
            created + make_interval(secs => 1 + (n % 120)) AS ended
        FROM ({_generated(dataset, created)}) AS g
    ) AS made
    """


def _pending_rows(dataset: Dataset) -> str:
    # Created over the last two hours; most due since then, some scheduled up to a day on.
    spacing = 7200 / max(dataset.pending, 1)
    created = f"now() - make_interval(secs => (CAST(:total AS int) - n) * {spacing})"
    return f"""
    INSERT INTO jobs (id, queue, type, priority, payload, status, attempts, max_attempts,
                      run_at, last_error, idempotency_key, unique_key, unique_states,
                      created_at, updated_at)
    SELECT id, queue, type, priority, payload, 'pending',
        CASE WHEN r > 0.95 THEN 1 ELSE 0 END, 3,
        CASE WHEN r < {SCHEDULED_SHARE} THEN now() + make_interval(secs => r * 288000)
             ELSE created END,
        CASE WHEN r > 0.95 THEN error END,
        idempotency_key, unique_key,
        CASE WHEN unique_key IS NOT NULL THEN ARRAY['pending', 'processing'] END,
        created, created
    FROM (
        SELECT {_columns(dataset, "p")}, r
        FROM ({_generated(dataset, created)}) AS g
    ) AS made
    """


def _processing_rows(dataset: Dataset) -> str:
    created = "now() - make_interval(secs => n)"
    return f"""
    INSERT INTO jobs (id, queue, type, priority, payload, status, attempts, max_attempts,
                      run_at, locked_until, lease_token, started_at, worker, created_at,
                      updated_at)
    SELECT id, queue, type, priority, payload, 'processing', 1, 3, created,
        now() + interval '1 day', 1, created, worker, created, created
    FROM (
        SELECT {_columns(dataset, "r")}
        FROM ({_generated(dataset, created, "1, CAST(:total AS int)")}) AS g
    ) AS made
    """


def _workflow_rows(dataset: Dataset) -> str:
    """Workflows as a graph's insert leaves them: a root due tomorrow (no worker runs
    during the bench) and steps waiting for it, an edge each."""
    job_id = (
        "(lpad(to_hex((extract(epoch FROM created) * 1000)::bigint), 12, '0') || '7'"
        " || substr(md5(:kind || w || '-' || n), 1, 19))::uuid"
    )
    return f"""
    WITH made AS (
        SELECT w, n, created, {job_id} AS id
        FROM (
            SELECT w, n, now() - make_interval(secs => w) AS created
            FROM generate_series(1, {dataset.workflows}) AS w,
                generate_series(0, {WORKFLOW_SIZE - 1}) AS n
        ) AS g
    ),
    rooted AS (
        SELECT made.*, root.id AS root FROM made JOIN made AS root USING (w)
        WHERE root.n = 0
    ),
    roots AS (
        INSERT INTO jobs (id, type, status, max_attempts, run_at, workflow_id,
                          has_dependents, created_at, updated_at)
        SELECT id, 'workflow.root', 'pending', 3, now() + interval '1 day', root, true,
            created, created
        FROM rooted WHERE n = 0
    ),
    steps AS (
        INSERT INTO jobs (id, type, status, max_attempts, workflow_id, depends_on,
                          waiting_for, created_at, updated_at)
        SELECT id, 'workflow.step', 'waiting', 3, root, ARRAY[root], 1, created, created
        FROM rooted WHERE n > 0
        RETURNING id, depends_on[1] AS root
    )
    INSERT INTO job_dependencies (depends_on, job_id) SELECT root, id FROM steps
    """


def _workers(dataset: Dataset) -> str:
    queues = ", ".join("'" + name + "'" for name in queue_names(dataset.queues))
    types = ", ".join("'" + name + "'" for name in type_names(dataset.types))
    return f"""
    INSERT INTO processes (id, host, pid, version, queues, types, concurrency, running,
                           expires_at)
    SELECT gen_random_uuid(), 'worker-' || n, 1000 + n, 'bench', ARRAY[{queues}],
        ARRAY[{types}], 10, 5, now() + interval '1 day'
    FROM generate_series(1, CAST(:total AS int)) AS n
    """


def _rollup(dataset: Dataset) -> str:
    queues = ", ".join("'" + name + "'" for name in queue_names(dataset.queues))
    return f"""
    INSERT INTO job_rollup (minute, queue, completed, failed, retried, picked, pickup_seconds,
                            pickup_50ms, pickup_250ms, pickup_1000ms)
    SELECT date_trunc('minute', now()) - make_interval(mins => m), queue,
        60, 2, 3, 65, 6.5, 50, 10, 5
    FROM generate_series(0, {dataset.days * 1440 - 1}) AS m, unnest(ARRAY[{queues}]) AS queue
    """


async def holds(engine: AsyncEngine, dataset: Dataset) -> bool:
    """Whether the database was filled, to the end, with exactly `dataset`."""
    async with engine.connect() as connection:
        exists = (
            await connection.execute(
                text("SELECT to_regclass(:name) IS NOT NULL"), {"name": _MARKER}
            )
        ).scalar_one()
        if not exists:
            return False
        found = (await connection.execute(text(f"SELECT description FROM {_MARKER}"))).scalar()
    return found == repr(dataset)


async def fill(engine: AsyncEngine, dataset: Dataset) -> None:
    """Empty the tables, then fill them with `dataset`, VACUUM ANALYZE, and mark them
    filled."""
    async with engine.begin() as connection:
        await connection.execute(text(f"DROP TABLE IF EXISTS {_MARKER}"))
        await connection.execute(
            text("TRUNCATE jobs, job_dependencies, job_waits, processes, queues, job_rollup")
        )
    await _chunked(engine, "finished jobs", _finished_rows(dataset), dataset.finished)
    await _chunked(engine, "pending jobs", _pending_rows(dataset), dataset.pending)
    async with engine.begin() as connection:
        await connection.execute(text(_processing_rows(dataset)), {"total": dataset.processing})
        await connection.execute(text(_workers(dataset)), {"total": dataset.workers})
        await connection.execute(text(_workflow_rows(dataset)), {"kind": "w"})
        # The charts' rollup: a row per minute of the days and queue, as workers leave it.
        await connection.execute(text(_rollup(dataset)))
        # Two queues paused, as an operator on call might have left them.
        await connection.execute(
            text("INSERT INTO queues (name, paused_at) VALUES (:a, now()), (:b, now())"),
            {"a": queue_names(dataset.queues)[-1], "b": queue_names(dataset.queues)[-2]},
        )
    async with progress("VACUUM ANALYZE"), engine.connect() as connection:
        autocommit = await connection.execution_options(isolation_level="AUTOCOMMIT")
        await autocommit.execute(text("VACUUM ANALYZE jobs"))
        await autocommit.execute(text("VACUUM ANALYZE job_dependencies"))
        await autocommit.execute(text("VACUUM ANALYZE processes"))
        await autocommit.execute(text("VACUUM ANALYZE queues"))
        await autocommit.execute(text("VACUUM ANALYZE job_rollup"))
    async with engine.begin() as connection:
        await connection.execute(text(f"CREATE TABLE {_MARKER} (description text NOT NULL)"))
        await connection.execute(
            text(f"INSERT INTO {_MARKER} VALUES (:description)"), {"description": repr(dataset)}
        )


async def _chunked(engine: AsyncEngine, label: str, statement: str, total: int) -> None:
    async with progress(label, total) as shown:
        for first in range(1, total + 1, _CHUNK):
            last = min(first + _CHUNK - 1, total)
            async with engine.begin() as connection:
                # The bench's own rows: losing the last ones to a crash costs nothing.
                await connection.execute(text("SET LOCAL synchronous_commit = off"))
                await connection.execute(
                    text(statement), {"first": first, "last": last, "total": total}
                )
            shown.update(last)


async def samples(engine: AsyncEngine, dataset: Dataset) -> Samples:
    """Values to fill the pages' parameters with, read from the filled table: each by
    an index, never by counting the table."""
    found: dict[Status, str] = {}
    async with engine.connect() as connection:
        for status in Status:
            # The status's partial index gives its first row at once.
            row = (
                await connection.execute(
                    text("SELECT id FROM jobs WHERE status = :status LIMIT 1"),
                    {"status": status.value},
                )
            ).first()
            if row is not None:
                found[status] = str(row[0])
        unique_key = (
            await connection.execute(
                text("SELECT unique_key FROM jobs WHERE unique_key IS NOT NULL LIMIT 1")
            )
        ).scalar()
        idempotency_key = (
            await connection.execute(
                text("SELECT idempotency_key FROM jobs WHERE idempotency_key IS NOT NULL LIMIT 1")
            )
        ).scalar()
        processes = (await connection.execute(text("SELECT id FROM processes ORDER BY id"))).all()
        # By its index (`ix_jobs_workflow`, of the jobs that have one).
        workflow = (
            await connection.execute(
                text("SELECT workflow_id FROM jobs WHERE workflow_id IS NOT NULL LIMIT 1")
            )
        ).scalar()
    queues = queue_names(dataset.queues)
    return Samples(
        # The busiest queue (the skew favours the first), and the one with the fewest
        # jobs (paused, by `fill`).
        queues=(queues[0], queues[-1]),
        types=tuple(type_names(dataset.types)),
        jobs=found,
        unique_key=str(unique_key or ""),
        idempotency_key=str(idempotency_key or ""),
        processes=tuple(str(row[0]) for row in processes),
        error_text="declined",
        workflow=str(workflow or ""),
    )
