"""Rates per job type within a queue: at most so many starts of one named type within any
window of its period, across every process, the queue's other types unpaced.

A new table, `type_rates`, holds a row per rated (queue, type): its rate and the starts
within its window (a time and a count per claim, 32 entries at most, as the queue's row
keeps its own). `queues.type_rated` says the queue has such rows, so that the claim
learns it from the queue's row it reads anyway. `jobqueue_type_turn` is a type's turn as
`jobqueue_key_turn` (0021) is a key's: the type's advisory lock, tried (a claim finding
it held leaves that type's jobs to the claim holding it), then the window read after the
lock; `jobqueue_record_type_starts` writes what the claim took, still under that lock.

Safe on a live table: a column with a constant default and a new, empty
table are catalog changes (their locks tried 50 ms at a time: `_briefly`); `jobs` is
not touched. Workers of the
code before this revision do not read `type_rated`: they claim a queue whose only limits
are type rates unpaced, so set type rates once every worker runs this one. Downgrading
drops the functions, the table and the column.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-05
"""

import runpy
from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out, not imported: a revision must keep meaning what it meant when written.

_COLUMN = "ADD COLUMN IF NOT EXISTS type_rated boolean NOT NULL DEFAULT false"

_TABLE = """
CREATE TABLE IF NOT EXISTS type_rates (
    queue text NOT NULL,
    type text NOT NULL,
    rate_limit integer NOT NULL
        CONSTRAINT ck_type_rates_rate_limit CHECK (rate_limit BETWEEN 1 AND 10000),
    rate_period interval NOT NULL
        CONSTRAINT ck_type_rates_rate_period
        CHECK (rate_period BETWEEN interval '0.1 seconds' AND interval '1 day'),
    starts timestamptz[] NOT NULL DEFAULT '{}',
    start_counts integer[] NOT NULL DEFAULT '{}',
    CONSTRAINT pk_type_rates PRIMARY KEY (queue, type)
)
"""

# Job type `of_type`'s turn in queue `of_queue`: its advisory lock (of this transaction,
# released at its commit), tried; then, with a snapshot taken after it, the starts
# within its rate's window: `slots`, how many more may start now, `opens_in`, till the
# window lets one more start, `stamp`, when the turn read it (no start the claim records
# may be earlier). Another claim holding the turn: no slots and no stamp, that claim is
# taking the type's jobs. The rate lifted since the caller read it: NULL slots, no cap.
_TYPE_TURN = """
CREATE OR REPLACE FUNCTION jobqueue_type_turn(
    of_queue text, of_type text,
    OUT slots integer, OUT opens_in interval, OUT stamp timestamptz
)
LANGUAGE plpgsql VOLATILE STRICT
AS $$
DECLARE
    rated record;
BEGIN
    IF NOT pg_try_advisory_xact_lock(
        hashtext('jobqueue job type'), hashtext(of_queue || '/' || of_type)
    ) THEN
        slots := 0;
        RETURN;
    END IF;
    SELECT rate_limit, rate_period, starts, start_counts INTO rated
    FROM type_rates WHERE queue = of_queue AND type = of_type;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    stamp := clock_timestamp();
    SELECT rated.rate_limit - coalesce(sum(start.count), 0),
        coalesce(min(start.at), stamp) + rated.rate_period - stamp
    INTO slots, opens_in
    FROM unnest(rated.starts, rated.start_counts) AS start (at, count)
    WHERE start.at > stamp - rated.rate_period;
    slots := greatest(slots, 0);
END
$$
"""

# `started` more starts of `of_type` at `started_at`, with those of its window still
# within its period (none more: only those left); written only when something changed.
# Past 32 entries the oldest is merged into the next, as though its starts were that
# late, which only keeps them in the window longer. The caller holds the type's turn.
_RECORD_TYPE_STARTS = """
CREATE OR REPLACE FUNCTION jobqueue_record_type_starts(
    of_queue text, of_type text, started_at timestamptz, started integer
)
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT
AS $$
DECLARE
    rated record;
    kept_at timestamptz[];
    kept_count integer[];
BEGIN
    SELECT rate_period, starts, start_counts INTO rated
    FROM type_rates WHERE queue = of_queue AND type = of_type;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT coalesce(array_agg(start.at ORDER BY start.at), '{}'),
        coalesce(array_agg(start.count ORDER BY start.at), '{}')
    INTO kept_at, kept_count
    FROM unnest(rated.starts, rated.start_counts) AS start (at, count)
    WHERE start.at > started_at - rated.rate_period;
    IF started = 0 AND cardinality(kept_at) = cardinality(rated.starts) THEN
        RETURN;
    END IF;
    IF started > 0 THEN
        IF cardinality(kept_at) >= 32 THEN
            kept_count := ARRAY[kept_count[1] + kept_count[2]] || kept_count[3:];
            kept_at := kept_at[2:];
        END IF;
        kept_at := kept_at || started_at;
        kept_count := kept_count || started;
    END IF;
    UPDATE type_rates SET starts = kept_at, start_counts = kept_count
    WHERE queue = of_queue AND type = of_type;
END
$$
"""

_SIGNATURES = (
    "jobqueue_type_turn(text, text)",
    "jobqueue_record_type_starts(text, text, timestamptz, integer)",
)


# How the locks are taken, written once for every revision (`migrations/locks.py`).
_briefly = runpy.run_path(str(Path(__file__).parents[1] / "locks.py"))["briefly"]


def upgrade() -> None:
    op.execute(_briefly(f"ALTER TABLE queues {_COLUMN}"))
    op.execute(_TABLE)
    op.execute(_TYPE_TURN)
    op.execute(_RECORD_TYPE_STARTS)


def downgrade() -> None:
    for signature in _SIGNATURES:
        op.execute(f"DROP FUNCTION IF EXISTS {signature}")
    op.execute(
        _briefly(
            "DROP TABLE IF EXISTS type_rates",
            "ALTER TABLE queues DROP COLUMN IF EXISTS type_rated",
        )
    )
