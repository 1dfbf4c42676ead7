"""Rates per partition key: at most so many starts of one key's jobs within any window of a
period (`queues.key_rate_limit` per `key_rate_period`), across every process.

`queues` gains the two columns; a new table, `key_starts`, keeps each key's starts within
its window as the queue's row keeps the queue's (a time and a count per claim, 32
entries at most), a row per (queue, key) that started jobs within the period.
`jobqueue_key_turn` is a key's turn as `jobqueue_free_slots` (0019) was, the key's
window read too: a claim visiting a key takes the key's advisory lock, counts its
running jobs and the starts in its window after the lock, and learns how many of its
jobs it may take; `jobqueue_record_key_starts` writes what it took, still under that
lock. Key rows whose window emptied are deleted by the next turn of their key, or by the
retention pass (`FORGET_KEY_STARTS`).

Safe on a live table: nullable columns without defaults are catalog changes (their lock
tried 50 ms at a time: `_briefly`), their checks read `queues` (a row per queue), the new
table starts empty; `jobs` is not touched. Workers of the code before this revision read only
`key_concurrency`: set a key rate once every worker runs this one. Downgrading drops
the table, the functions and the columns.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-05
"""

import runpy
from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out, not imported: a revision must keep meaning what it meant when written.

_COLUMNS = (
    "ADD COLUMN IF NOT EXISTS key_rate_limit integer"
    " CONSTRAINT ck_queues_key_rate_limit CHECK (key_rate_limit BETWEEN 1 AND 10000)",
    "ADD COLUMN IF NOT EXISTS key_rate_period interval"
    " CONSTRAINT ck_queues_key_rate_period"
    " CHECK (key_rate_period BETWEEN interval '0.1 seconds' AND interval '1 day')",
    "ADD CONSTRAINT ck_queues_key_rate"
    " CHECK ((key_rate_limit IS NULL) = (key_rate_period IS NULL))",
)

_TABLE = """
CREATE TABLE IF NOT EXISTS key_starts (
    queue text NOT NULL,
    partition_key text NOT NULL,
    starts timestamptz[] NOT NULL,
    start_counts integer[] NOT NULL,
    CONSTRAINT pk_key_starts PRIMARY KEY (queue, partition_key)
)
"""

# Partition key `of_key`'s turn in queue `of_queue`: its advisory lock (of this
# transaction, released at its commit), tried; then, with a snapshot taken after it, its
# running jobs but those in `ending` (`cap` less them: `slots`) and the starts within
# the window of its rate (`rate` per `period`, less them: `rate_left`; `opens_in`: till
# the window lets one more start; `stamp`: the time its starts are written with). Slots
# are the lesser of the two, for the limits it has. NULL slots when another claim holds
# the key's turn: that claim is taking them. A window left empty is deleted here.
_KEY_TURN = """
CREATE OR REPLACE FUNCTION jobqueue_key_turn(
    of_queue text, of_key text, ending uuid[], cap integer, rate integer, period interval,
    OUT slots integer, OUT rate_left integer, OUT opens_in interval, OUT stamp timestamptz
)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    window_of record;
BEGIN
    IF NOT pg_try_advisory_xact_lock(
        hashtext('jobqueue partition key'), hashtext(of_queue || '/' || of_key)
    ) THEN
        RETURN;
    END IF;
    IF cap IS NOT NULL THEN
        slots := cap - (
            SELECT count(*) FROM (
                SELECT FROM jobs
                WHERE jobs.queue = of_queue
                  AND jobs.partition_key = of_key
                  AND jobs.status = 'processing'
                  AND NOT (jobs.id = ANY (coalesce(ending, '{}')))
                LIMIT cap
            ) AS running
        );
    END IF;
    IF rate IS NOT NULL THEN
        stamp := clock_timestamp();
        SELECT starts, start_counts INTO window_of
        FROM key_starts WHERE queue = of_queue AND partition_key = of_key;
        IF FOUND THEN
            SELECT rate - coalesce(sum(start.count), 0),
                coalesce(min(start.at), stamp) + period - stamp
            INTO rate_left, opens_in
            FROM unnest(window_of.starts, window_of.start_counts) AS start (at, count)
            WHERE start.at > stamp - period;
            IF rate_left = rate THEN
                DELETE FROM key_starts WHERE queue = of_queue AND partition_key = of_key;
            END IF;
        ELSE
            rate_left := rate;
            opens_in := period;
        END IF;
        slots := least(slots, rate_left);
    END IF;
    slots := greatest(slots, 0);
END
$$
"""

# `started` more starts of `of_key` at `started_at`, with those of its window still
# within `period`; past 32 entries the oldest is merged into the next (as though its
# starts were that late, which only keeps them in the window longer). The caller holds
# the key's turn (`jobqueue_key_turn`).
_RECORD_KEY_STARTS = """
CREATE OR REPLACE FUNCTION jobqueue_record_key_starts(
    of_queue text, of_key text, period interval, started_at timestamptz, started integer
)
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT
AS $$
DECLARE
    kept_at timestamptz[];
    kept_count integer[];
BEGIN
    SELECT coalesce(array_agg(start.at ORDER BY start.at), '{}'),
        coalesce(array_agg(start.count ORDER BY start.at), '{}')
    INTO kept_at, kept_count
    FROM key_starts,
        unnest(key_starts.starts, key_starts.start_counts) AS start (at, count)
    WHERE key_starts.queue = of_queue AND key_starts.partition_key = of_key
      AND start.at > started_at - period;
    IF cardinality(kept_at) >= 32 THEN
        kept_count := ARRAY[kept_count[1] + kept_count[2]] || kept_count[3:];
        kept_at := kept_at[2:];
    END IF;
    INSERT INTO key_starts (queue, partition_key, starts, start_counts)
    VALUES (of_queue, of_key, kept_at || started_at, kept_count || started)
    ON CONFLICT (queue, partition_key) DO UPDATE
    SET starts = excluded.starts, start_counts = excluded.start_counts;
END
$$
"""

_SIGNATURES = (
    "jobqueue_key_turn(text, text, uuid[], integer, integer, interval)",
    "jobqueue_record_key_starts(text, text, interval, timestamptz, integer)",
)


# How the locks are taken, written once for every revision (`migrations/locks.py`).
_briefly = runpy.run_path(str(Path(__file__).parents[1] / "locks.py"))["briefly"]


def upgrade() -> None:
    op.execute(_briefly(*(f"ALTER TABLE queues {column}" for column in _COLUMNS)))
    op.execute(_TABLE)
    op.execute(_KEY_TURN)
    op.execute(_RECORD_KEY_STARTS)


def downgrade() -> None:
    for signature in _SIGNATURES:
        op.execute(f"DROP FUNCTION IF EXISTS {signature}")
    op.execute(
        _briefly(
            "DROP TABLE IF EXISTS key_starts",
            "ALTER TABLE queues DROP CONSTRAINT IF EXISTS ck_queues_key_rate",
            "ALTER TABLE queues DROP COLUMN IF EXISTS key_rate_period",
            "ALTER TABLE queues DROP COLUMN IF EXISTS key_rate_limit",
        )
    )
