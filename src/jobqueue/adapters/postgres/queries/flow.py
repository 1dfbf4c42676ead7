"""The flow-control parts of a limited claim (`claims.LIMITED_CLAIM`,
`claims.RECORD_AND_LIMITED_CLAIM`): how many jobs a queue's limits let it take, and what
it leaves behind for the next one.

A queue with a limit (`queues.concurrency`, `queues.rate_limit` per `rate_period`) is
claimed one claim at a time: once it has locked the due jobs it may take (SKIP LOCKED,
outside the turn: `claims._due`), the claim locks the queue's row (`gate`), so claims of
that queue across every process take turns from there to their commit, and none of them
counts while another takes; it then takes as many of its locked jobs as the limits
allow, in order, and the rest go back to pending untouched at its commit. A queue
without limits is not locked, nor is one when nothing is due.

Concurrency: a slot is a running job itself (status `processing`), counted in
ix_jobs_running_by_queue, so a killed process's slots come back with its leases, and
nothing can go stale. A statement sees the table as of its start, though, and a claim
that waited for the lock would not see the jobs the claims before it took meanwhile: it
counts them through `jobqueue_running_jobs` (migration 0018), a VOLATILE SQL function,
whose query PostgreSQL runs with a snapshot of its own, taken after the lock. The jobs
this same statement ends are still processing in that snapshot (a statement never sees
its own writes): they are left out by id, freeing their slots for its claim.

Rate: the queue's row keeps the starts within the last period, a time and a count per
claim (`starts`, `start_counts`: a claim's jobs start at one instant), stamped after the
lock, so in the order claims took turns; a claim takes at most what the window has left,
and every window of the period holds at most the limit. Per claim, not per job: the row
holds as many entries as claims started jobs within the period, however high the rate.
"""

from __future__ import annotations

_GATE_COLUMNS = "name, concurrency, rate_limit, rate_period, starts, start_counts, key_concurrency"


def gate(limited: str, due: str, unlocked: str = "false") -> str:
    """The queue's limits and its rate's starts, locked and read in their newest version
    when the queue has the limits its statement counts (`limited`, a condition on its
    row) and jobs are due (`due`, a condition); no row otherwise (nothing is locked).
    Where `unlocked` holds of the row, it is read without the lock: the statement takes
    turns by other means (`keys.py`)."""
    return f"""
    held AS MATERIALIZED (
        SELECT {_GATE_COLUMNS}
        FROM queues
        WHERE name = :queue AND ({limited}) AND NOT ({unlocked}) AND ({due})
        FOR NO KEY UPDATE
    ),
    gate AS MATERIALIZED (
        SELECT * FROM held
        UNION ALL
        SELECT {_GATE_COLUMNS}
        FROM queues
        WHERE name = :queue AND ({limited}) AND ({unlocked}) AND ({due})
          AND NOT EXISTS (SELECT FROM held)
    ),
    stamp AS MATERIALIZED (SELECT clock_timestamp() AS at FROM gate),
    recent AS MATERIALIZED (
        SELECT coalesce(array_agg(started.at ORDER BY started.at), '{{}}') AS at,
            coalesce(array_agg(started.n ORDER BY started.at), '{{}}') AS counts,
            coalesce(sum(started.n), 0) AS total,
            count(*) AS kept
        FROM gate, stamp, unnest(gate.starts, gate.start_counts) AS started (at, n)
        WHERE started.at > stamp.at - gate.rate_period
    ),
"""


# A queue with a limit on the whole queue (a per-key limit is `keys.py`'s).
GATE = gate("concurrency IS NOT NULL OR rate_limit IS NOT NULL", "EXISTS (SELECT FROM due)")


def allowance(ending: str) -> str:
    """How many jobs the claim may take (`n`), and what each limit had left: `:limit`
    when the queue has none. `ending`: the ids of the jobs this same statement ends (an
    `uuid[]` expression), which free their slots for its claim."""
    return f"""
    allowance AS MATERIALIZED (
        SELECT coalesce(limited.n, CAST(:limit AS integer)) AS n,
            limited.concurrency_left, limited.rate_left, limited.rate_opens_in
        FROM (SELECT) AS one
        LEFT JOIN (
            SELECT greatest(
                    least(CAST(:limit AS integer), left_now.concurrency, left_now.rate), 0
                ) AS n,
                left_now.concurrency AS concurrency_left,
                left_now.rate AS rate_left,
                left_now.opens_in AS rate_opens_in
            FROM gate, stamp, LATERAL (
                SELECT
                    gate.concurrency
                    - jobqueue_running_jobs(gate.name, {ending}, gate.concurrency)
                    AS concurrency,
                    gate.rate_limit - recent.total AS rate,
                    coalesce(recent.at[1], stamp.at) + gate.rate_period - stamp.at AS opens_in
                FROM recent
            ) AS left_now
        ) AS limited ON true
    ),
"""


# What the claim leaves in the queue's row: the starts still in the rate's window, and
# its own. Written only when something changed, so that an idle queue's polls write
# nothing, and a queue with a concurrency limit alone is never written by its claims.
# At most `MAX_STARTS` entries: past them, the oldest is merged into the next, as though
# its starts were that late. That only ever keeps starts in the window longer (never
# lets one more in), and keeps the row small, untoasted, under a high rate's hundreds of
# claims a period; a rate of fewer claims a period than that is kept exactly.
MAX_STARTS = 32
FLOW = f"""
    flow AS (
        UPDATE queues
        SET starts = CASE
                WHEN taken.started = 0 THEN recent.at
                WHEN recent.kept >= {MAX_STARTS} THEN recent.at[2:] || stamp.at
                ELSE recent.at || stamp.at
            END,
            start_counts = CASE
                WHEN taken.started = 0 THEN recent.counts
                WHEN recent.kept >= {MAX_STARTS}
                THEN ARRAY[recent.counts[1] + recent.counts[2]] || recent.counts[3:]
                    || taken.started
                ELSE recent.counts || taken.started
            END
        FROM gate, stamp, recent,
            (SELECT CAST(count(*) AS integer) AS started FROM claimed) AS taken
        WHERE queues.name = gate.name
          AND gate.rate_limit IS NOT NULL
          AND (taken.started > 0 OR recent.kept < cardinality(gate.starts))
    )
"""
