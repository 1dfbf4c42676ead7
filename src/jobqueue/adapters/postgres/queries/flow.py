"""The flow-control parts of a claim (`jobs.CLAIM`, `jobs.RECORD_AND_CLAIM`): how many jobs
a queue's limits let this claim take, and what the claim leaves behind for the next one.

A queue with a limit (`queues.concurrency`, `queues.rate_limit` per `rate_period`) is
claimed one claim at a time: the claim locks the queue's row first (`gate`), so claims of
that queue across every process take turns, and none of them counts while another takes.
A queue without one is not locked, and its claims never wait for each other.

Concurrency: a slot is a running job itself (status `processing`), counted in
ix_jobs_running_by_queue, so a killed process's slots come back with its leases, and
nothing can go stale. But a statement sees the table as of its start, and a claim that
waited for the lock does not see the jobs the claims before it took meanwhile. Those it
finds in the queue's row, which it reads as of now (a locked row is read in its newest
version): every claim adds the jobs it took to `holder_*` (id, lease token, when), and
drops the ones it sees ended. A holder this claim's snapshot shows with an older token
was taken after that snapshot: it counts. Counting in both ways can only count a job
twice (it ended, and was taken again since), never miss one: a limit is never exceeded,
at worst a slot stays unused until the next claim.

Rate: the queue's row keeps the starts within the last period, a time and a count per
claim (`starts`, `start_counts`: a claim's jobs start at one instant), stamped after the
lock, so in the order claims took turns; a claim takes at most what the window has left,
and every window of the period holds at most the limit. Per claim, not per job: the row
holds as many entries as claims started jobs within the period, however high the rate.
"""

from __future__ import annotations

# A holder whose job this claim cannot see at all was either taken after its snapshot
# (inserted and claimed since) or deleted since it ended. No claim runs longer than the
# statement timeout, so one recorded this long ago is the second kind.
_VANISHED_AFTER = "interval '1 minute'"

# The queue's limits and flow state, locked and read in their newest version when the
# queue has a limit; no row when it has none (nothing is locked).
GATE = """
    gate AS MATERIALIZED (
        SELECT name, concurrency, rate_limit, rate_period,
            holder_ids, holder_tokens, holder_at, starts, start_counts
        FROM queues
        WHERE name = :queue AND (concurrency IS NOT NULL OR rate_limit IS NOT NULL)
        FOR NO KEY UPDATE
    ),
    stamp AS MATERIALIZED (SELECT clock_timestamp() AS at FROM gate),
    recent AS MATERIALIZED (
        SELECT coalesce(array_agg(started.at ORDER BY started.at), '{}') AS at,
            coalesce(array_agg(started.n ORDER BY started.at), '{}') AS counts,
            coalesce(sum(started.n), 0) AS total,
            count(*) AS kept
        FROM gate, stamp, unnest(gate.starts, gate.start_counts) AS started (at, n)
        WHERE started.at > stamp.at - gate.rate_period
    ),
"""

# The gate's holders as this statement's snapshot sees their jobs.
HOLDERS = f"""
    holders AS MATERIALIZED (
        SELECT held.id, held.token, held.at,
            CASE WHEN jobs.id IS NULL THEN held.at < now() - {_VANISHED_AFTER}
                ELSE jobs.lease_token > held.token
                    OR (jobs.lease_token = held.token AND jobs.status <> 'processing')
            END AS ended,
            jobs.id IS NULL OR jobs.lease_token < held.token AS unseen
        FROM gate
        CROSS JOIN LATERAL unnest(gate.holder_ids, gate.holder_tokens, gate.holder_at)
            AS held (id, token, at)
        LEFT JOIN jobs ON jobs.id = held.id
        WHERE gate.concurrency IS NOT NULL
    ),
"""


def allowance(excluded: str) -> str:
    """How many jobs the claim may take (`n`), and what each limit had left: `:limit`
    when the queue has none. `excluded`: a condition on `jobs` leaving out running jobs
    this same statement ends (they free their slots for its claim)."""
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
                    gate.concurrency - (
                        SELECT count(*) FROM (
                            SELECT FROM jobs
                            WHERE queue = :queue AND status = 'processing'{excluded}
                            LIMIT gate.concurrency
                        ) AS running
                    ) - (SELECT count(*) FROM holders WHERE unseen AND NOT ended)
                    AS concurrency,
                    gate.rate_limit - recent.total AS rate,
                    coalesce(recent.at[1], stamp.at) + gate.rate_period - stamp.at AS opens_in
                FROM recent
            ) AS left_now
        ) AS limited ON true
    ),
"""


# What the claim leaves in the queue's row: the holders not seen ended, and the jobs it
# took; the starts still in the window, and its own. Written only when something changed,
# so that an idle queue's polls write nothing.
FLOW = """
    flow AS (
        UPDATE queues
        SET holder_ids = kept.ids || taken.ids,
            holder_tokens = kept.tokens || taken.tokens,
            holder_at = kept.at || array_fill(stamp.at, ARRAY[taken.n]),
            starts = CASE WHEN taken.started > 0 THEN recent.at || stamp.at ELSE recent.at END,
            start_counts = CASE WHEN taken.started > 0
                THEN recent.counts || taken.started ELSE recent.counts END
        FROM gate, stamp, recent,
            (
                SELECT coalesce(array_agg(id ORDER BY at) FILTER (WHERE NOT ended), '{}') AS ids,
                    coalesce(array_agg(token ORDER BY at) FILTER (WHERE NOT ended), '{}')
                    AS tokens,
                    coalesce(array_agg(at ORDER BY at) FILTER (WHERE NOT ended), '{}') AS at,
                    count(*) FILTER (WHERE ended) AS dropped
                FROM holders
            ) AS kept,
            LATERAL (
                SELECT CASE WHEN gate.concurrency IS NULL THEN '{}'
                        ELSE coalesce(array_agg(id), '{}') END AS ids,
                    CASE WHEN gate.concurrency IS NULL THEN '{}'
                        ELSE coalesce(array_agg(lease_token), '{}') END AS tokens,
                    CASE WHEN gate.concurrency IS NULL THEN 0
                        ELSE CAST(count(*) AS integer) END AS n,
                    CASE WHEN gate.rate_limit IS NULL THEN 0
                        ELSE CAST(count(*) AS integer) END AS started
                FROM claimed
            ) AS taken
        WHERE queues.name = gate.name
          AND (taken.n + taken.started > 0 OR kept.dropped > 0
               OR recent.kept < cardinality(gate.starts))
    )
"""
