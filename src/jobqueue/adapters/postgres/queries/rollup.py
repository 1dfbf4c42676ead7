"""The statements on `job_rollup`, the dashboard's per-minute, per-queue counts
(`domain/throughput.py`): a worker process's flush, a chart's series, retention's
delete. Their column lists are written from `schema.py`'s, so a bucket is named once."""

from __future__ import annotations

from jobqueue.adapters.postgres.schema_workers import PICKUP_COLUMNS, ROLLUP_COUNTERS
from jobqueue.adapters.postgres.statement import Statement

# Every column a flush adds to, and the SQL type of its parameter's array.
ADDED: tuple[tuple[str, str], ...] = (
    *((name, "bigint") for name in ROLLUP_COUNTERS),
    ("pickup_seconds", "double precision"),
    *((name, "bigint") for name in PICKUP_COLUMNS),
)
# Where slots start: any fixed instant on a whole hour, so that slots of 1 or 15 minutes
# begin on the minute and the quarter hour.
_ORIGIN = "TIMESTAMPTZ '2000-01-01 00:00:00+00'"

_names = ", ".join(name for name, _ in ADDED)
_arrays = ", ".join(f"CAST(:{name} AS {kind}[])" for name, kind in ADDED)
_sums = ",\n        ".join(
    f"sum({name}) AS {name}" if kind != "bigint" else f"CAST(sum({name}) AS bigint) AS {name}"
    for name, kind in ADDED
)
_filled = ",\n    ".join(f"coalesce(counted.{name}, 0) AS {name}" for name, _ in ADDED)
_additions = ",\n        ".join(f"{name} = r.{name} + EXCLUDED.{name}" for name, _ in ADDED)

# A process's counts added to the current minute's rows (the database's clock: every
# process agrees on the minute however far its own clock is off), one row per queue, to
# whatever other processes added. Callers send queues sorted: two flushes touching the
# same rows lock them in the same order and cannot deadlock.
ADD = Statement(
    "rollup_add",
    f"""
    INSERT INTO job_rollup AS r (minute, queue, {_names})
    SELECT date_trunc('minute', now()), counts.*
    FROM unnest(CAST(:queue AS text[]), {_arrays}) AS counts
    ON CONFLICT (minute, queue) DO UPDATE
    SET {_additions}
    """,
)

# A chart's `:points` slots of `:step`, the last holding now, each the sum of the rows
# of its minutes (of one queue's, when `:queue` is not NULL); a slot without rows is
# zeros. Each slot reads its own closed range of the primary key: bounded at both ends,
# so that even a generic plan, blind to the values, reads the key and never the table.
# At most a window's minutes times the queues, in `:points` index scans.
SERIES = Statement(
    "rollup_series",
    f"""
    WITH slots AS (
        SELECT generate_series(
            date_bin(CAST(:step AS interval), now(), {_ORIGIN})
                - CAST(:step AS interval) * (CAST(:points AS integer) - 1),
            date_bin(CAST(:step AS interval), now(), {_ORIGIN}),
            CAST(:step AS interval)
        ) AS at
    )
    SELECT slots.at,
    {_filled}
    FROM slots CROSS JOIN LATERAL (
        SELECT
        {_sums}
        FROM job_rollup
        WHERE minute >= slots.at AND minute < slots.at + CAST(:step AS interval)
          AND (CAST(:queue AS text) IS NULL OR queue = CAST(:queue AS text))
    ) AS counted
    ORDER BY slots.at
    """,
)

# Retention: the oldest minutes' rows past `:older_than`, `:limit` at a time, read from
# the start of the primary key and deleted by their row addresses (a join on the key
# would let a generic plan, blind to `:limit`, hash the whole table). SKIP LOCKED:
# several processes pruning delete different rows.
PRUNE = Statement(
    "rollup_prune",
    """
    DELETE FROM job_rollup
    WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM job_rollup
        WHERE minute < now() - CAST(:older_than AS interval)
        ORDER BY minute
        LIMIT :limit
        FOR UPDATE SKIP LOCKED
    ))
    RETURNING 1
    """,
)
