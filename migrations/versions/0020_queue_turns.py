"""A limited claim's turn of its queue as functions: the row's lock, the slots counted
after it, the rate's window read and written.

`jobqueue_take_turn` locks a limited queue's row, counts its running jobs with a
snapshot taken after the lock and reads the rate's window, and says how many jobs the
claim may take; told how many are due, it also records their starts. `jobqueue_record_starts`
writes the window (the starts still in it, and a claim's own): the claim of a queue that
also has a per-key limit knows what it took only after visiting the keys, and calls it
last. `jobqueue_running_jobs` (0018) becomes PL/pgSQL, its count the same: a SQL
function's query is planned again by every statement that calls it, a PL/pgSQL one's once
per connection. The claims' statements were these parts as CTEs; a third of their
planning, and their row's lock now lasts for a planned-once count, not a planned one.

The row and what it holds are unchanged, so workers of the code before and after this
revision take turns of the same queue side by side. Functions only: no lock on a table.
Downgrading drops the two and restores 0018's `jobqueue_running_jobs`.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-05
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out, not imported: a revision must keep meaning what it meant when written.

# The running jobs of `queue` but those in `ending`, counted up to `cap`. STRICT: a queue
# without a concurrency limit (a NULL cap) counts nothing.
_RUNNING_JOBS = """
CREATE OR REPLACE FUNCTION jobqueue_running_jobs(queue text, ending uuid[], cap integer)
RETURNS integer
LANGUAGE plpgsql VOLATILE STRICT
AS $$
BEGIN
    RETURN (
        SELECT count(*) FROM (
            SELECT FROM jobs
            WHERE jobs.queue = jobqueue_running_jobs.queue
              AND jobs.status = 'processing'
              AND NOT (jobs.id = ANY (jobqueue_running_jobs.ending))
            LIMIT jobqueue_running_jobs.cap
        ) AS running
    );
END
$$
"""

# 0018's, for the downgrade.
_RUNNING_JOBS_0018 = """
CREATE OR REPLACE FUNCTION jobqueue_running_jobs(queue text, ending uuid[], cap integer)
RETURNS integer
LANGUAGE sql VOLATILE STRICT
AS $$
    SELECT CAST(count(*) AS integer) FROM (
        SELECT FROM jobs
        WHERE jobs.queue = jobqueue_running_jobs.queue
          AND jobs.status = 'processing'
          AND NOT (jobs.id = ANY (jobqueue_running_jobs.ending))
        LIMIT jobqueue_running_jobs.cap
    ) AS running
$$
"""

# The starts of `of_queue`'s rate still within its period at `started_at`, and
# `started` more at that instant (none: only those left). Written only when something
# changed. At most 32 entries: past them, the oldest is merged into the next, as though
# its starts were that late, which only keeps starts in the window longer. The caller
# holds the row's lock (`jobqueue_take_turn`).
_RECORD_STARTS = """
CREATE OR REPLACE FUNCTION jobqueue_record_starts(
    of_queue text, started_at timestamptz, started integer
)
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT
AS $$
DECLARE
    window_of record;
    kept_at timestamptz[];
    kept_count integer[];
BEGIN
    SELECT rate_period, starts, start_counts INTO window_of
    FROM queues WHERE name = of_queue AND rate_limit IS NOT NULL;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT coalesce(array_agg(start.at ORDER BY start.at), '{}'),
        coalesce(array_agg(start.count ORDER BY start.at), '{}')
    INTO kept_at, kept_count
    FROM unnest(window_of.starts, window_of.start_counts) AS start (at, count)
    WHERE start.at > started_at - window_of.rate_period;
    IF started = 0 AND cardinality(kept_at) = cardinality(window_of.starts) THEN
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
    UPDATE queues SET starts = kept_at, start_counts = kept_count WHERE name = of_queue;
END
$$
"""

# A claim's turn of `of_queue`, when it has limits of the whole queue and the claim has
# jobs due (`due`, how many; any positive number when not known yet): its row locked
# till the claim's commit, its running jobs counted after the lock (but those in
# `ending`, which the claim's statement ends), the starts within the rate's period read,
# stamped `stamp` (the claim's starts' time). `n`: how many of the `wanted` the limits
# allow (`wanted` without limits, or with nothing due), and what each limit had left
# (NULL for a limit the queue does not have). With `record`, the starts of the jobs it
# will take (`n`, at most `due`) are written at once.
_TAKE_TURN = """
CREATE OR REPLACE FUNCTION jobqueue_take_turn(
    of_queue text, wanted integer, ending uuid[], due integer, record boolean,
    OUT n integer, OUT concurrency_left integer, OUT rate_left integer,
    OUT rate_opens_in interval, OUT stamp timestamptz
)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    limits record;
    started integer;
BEGIN
    n := wanted;
    IF due <= 0 THEN
        RETURN;
    END IF;
    SELECT concurrency, rate_limit, rate_period, starts, start_counts INTO limits
    FROM queues
    WHERE name = of_queue AND (concurrency IS NOT NULL OR rate_limit IS NOT NULL)
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    stamp := clock_timestamp();
    IF limits.concurrency IS NOT NULL THEN
        concurrency_left := limits.concurrency - jobqueue_running_jobs(
            of_queue, coalesce(ending, '{}'), limits.concurrency
        );
    END IF;
    IF limits.rate_limit IS NOT NULL THEN
        SELECT limits.rate_limit - coalesce(sum(start.count), 0),
            coalesce(min(start.at), stamp) + limits.rate_period - stamp
        INTO rate_left, rate_opens_in
        FROM unnest(limits.starts, limits.start_counts) AS start (at, count)
        WHERE start.at > stamp - limits.rate_period;
    END IF;
    n := greatest(least(wanted, concurrency_left, rate_left), 0);
    IF record THEN
        PERFORM jobqueue_record_starts(of_queue, stamp, least(n, due));
    END IF;
END
$$
"""

_SIGNATURES = (
    "jobqueue_take_turn(text, integer, uuid[], integer, boolean)",
    "jobqueue_record_starts(text, timestamptz, integer)",
)


def upgrade() -> None:
    op.execute(_RUNNING_JOBS)
    op.execute(_RECORD_STARTS)
    op.execute(_TAKE_TURN)


def downgrade() -> None:
    for signature in _SIGNATURES:
        op.execute(f"DROP FUNCTION IF EXISTS {signature}")
    op.execute(_RUNNING_JOBS_0018)
