"""The parts of a claim of a queue with per-key limits (`queues.key_concurrency`,
`key_rate_limit`: `claims.KEYED_CLAIM`, `claims.RECORD_AND_KEYED_CLAIM`): which keys it
visits, and how many of each key's jobs it may take.

Fair shares: the claim visits the keys with pending jobs in key order, starting after the
last key the process's previous claim of the queue took from (`:after_key`) and wrapping
round, found by a loose scan of ix_jobs_due_by_partition (one index descent per key,
however many jobs a key has), and takes from each what its free slots allow until it has
all it may take. The next claim goes on from there, so while several keys have backlogs
claims rotate between them: a key with a few jobs waits at most about one rotation,
however many jobs another key has. Within a key, jobs go by priority, then due time.

Per-key limit: like the queue's concurrency (`flow.py`), a slot is a running job. Claims
take turns per key, not per queue: visiting a key, a claim takes the key's advisory lock
(till its commit) and counts the key's running jobs with a snapshot taken after it,
through `jobqueue_key_turn` (migration 0021), then locks at most the key's free slots
of its due jobs; a key whose turn another claim holds is passed over, as SKIP LOCKED
passes a locked job, so claims of different keys never wait for each other. The queue's
row is locked only for its own limits, when it has any (`flow.turn`), which then bound
the whole.

Per-key rate: like the queue's rate, each key's starts within the period are kept, in
`key_starts`; the same turn reads the key's window (its slots are the lesser of the
two), and the claim writes what it took from the key after the visits (`RECORD`),
under the turn it still holds.

Jobs without a key in such a queue share no slot. They are not in the index of keys; a
claim looks for them among the next `SWEEP_PROBE` due jobs of each (priority, type)
range, sweeping the queue claim after claim: every claim while sweeps find such jobs,
else one claim in `SWEEP_EVERY` (a sweep reads its jobs' rows, and costs a claim of keys
about a fifth of its time). Behind a backlog of keyed jobs they wait about
(backlog / probe × SWEEP_EVERY) claims: give every job of such a queue a key where that
matters.
"""

from __future__ import annotations

from jobqueue.adapters.postgres.queries.sql import in_ranges
from jobqueue.adapters.postgres.statement import Statement

# How many keys a claim visits at most, however few jobs it asks for: enough that a claim
# finds keys with free slots past a few full ones (it visits twice as many as it asks
# for jobs, if more; it stops visiting once it has all it may take).
KEYS_VISITED = 16
# How many due jobs of each range a claim reads in its sweep for jobs without a key. A
# constant in the statement, not a parameter: PostgreSQL's generic plan of the statement
# is then as cheap as those made for each run's values, and it keeps that plan (planning
# the statement costs about as much as running it); as a parameter, it never did.
SWEEP_PROBE = 32
# One claim in this many sweeps, while the last sweep found no job without a key.
SWEEP_EVERY = 4


# The first key with pending jobs after `{after}`: one descent of the index. ORDER BY
# ... LIMIT 1, not min(): with statistics taken before the queue had keys, the planner
# estimates a row or none either way, and may aggregate every entry for min() rather
# than stop at the first. LATERAL with a LIMIT, so that it runs once per step, not once
# per reference to its result.
def _key_after(after: str) -> str:
    return f"""LEFT JOIN LATERAL (
        SELECT partition_key AS key FROM jobs
        WHERE status = 'pending' AND queue = :queue AND partition_key > {after}
        ORDER BY partition_key
        LIMIT 1
    ) AS after ON true"""


# The keys with pending jobs, from the one after `:after_key` on, then from the first,
# each found by one descent of the index: at most `:keys`, none twice. Visited lazily:
# a claim stops asking for keys once it has all it may take.
KEYS = f"""
    first_key AS MATERIALIZED (
        SELECT after.key FROM (SELECT) AS start {_key_after("''")}
    ),
    keys (key, visited, wrapped) AS (
        SELECT step.key, 1, step.wrapped
        FROM (SELECT) AS start {_key_after(":after_key")},
        LATERAL (
            SELECT coalesce(after.key, (SELECT key FROM first_key)) AS key,
                after.key IS NULL AS wrapped
        ) AS step
        WHERE step.key IS NOT NULL
        UNION ALL
        SELECT step.key, keys.visited + 1, step.wrapped
        FROM keys {_key_after("keys.key")},
        LATERAL (
            SELECT coalesce(
                    after.key, CASE WHEN NOT keys.wrapped THEN (SELECT key FROM first_key) END
                ) AS key,
                keys.wrapped OR after.key IS NULL AS wrapped
        ) AS step
        WHERE keys.visited < CAST(:keys AS integer)
          AND step.key IS NOT NULL
          AND NOT (step.wrapped AND step.key > :after_key)
    ),
"""

# Jobs without a key, found by a sweep of the queue's due ranges when the claim sweeps
# (`:sweep`, a condition PostgreSQL tests once, before reading anything): it reads the
# next `SWEEP_PROBE` due jobs of each range after where the process's last sweep stopped
# (`:head_after_*`), without locking them (most are keyed jobs, which the visits lock),
# and keeps those without a key; the store moves the sweep on (`HEAD_ENDS`).
HEAD = f"""
    head_read AS MATERIALIZED (
        SELECT picked.id, picked.run_at, picked.partition_key, ranges.position
        {in_ranges("id, run_at, partition_key", "head_after", str(SWEEP_PROBE))}
        WHERE CAST(:sweep AS boolean)
    ),
    head AS MATERIALIZED (
        SELECT id, run_at, position FROM head_read WHERE partition_key IS NULL
    ),
    head_ends AS MATERIALIZED (
        SELECT position, CAST(count(*) AS integer) AS read,
            (array_agg(run_at ORDER BY run_at DESC, id DESC))[1] AS run_at,
            (array_agg(id ORDER BY run_at DESC, id DESC))[1] AS id
        FROM head_read GROUP BY position
    ),
"""

# Where each range's sweep stopped: its position among the ranges, how many jobs it
# read, and the last one's key.
HEAD_ENDS = """
    ARRAY(SELECT position FROM head_ends ORDER BY position) AS head_positions,
    ARRAY(SELECT read FROM head_ends ORDER BY position) AS head_reads,
    ARRAY(SELECT run_at FROM head_ends ORDER BY position) AS head_run_ats,
    ARRAY(SELECT id FROM head_ends ORDER BY position) AS head_ids
"""

# A queue with a per-key limit, not paused, when it has keys or jobs without one to
# visit. Without that row (`gate`), nothing is visited nor locked.
KEYED = "(key_concurrency IS NOT NULL OR key_rate_limit IS NOT NULL)"
LIMITED = f"{KEYED} AND paused_at IS NULL"
DUE = "EXISTS (SELECT FROM keys) OR EXISTS (SELECT FROM head)"
# Whether the claim has a queue to visit, as `flow.turn` is told what is due.
GATED = "(SELECT count(*) FROM gate)"


def gate(*, limited: bool) -> str:
    """The queue's row, read (its turn is `flow.turn`'s, when `limited`: the queue also
    has limits of the whole queue); none when the claim may not visit it. Without
    `limited`, none either when the queue has limits of the whole queue now, which this
    claim does not count (it refuses such a queue), and all the claim asks for is
    allowed."""
    whole_queue, allowance = (
        ("", "")
        if limited
        else (
            "AND concurrency IS NULL AND rate_limit IS NULL",
            "allowance AS MATERIALIZED (SELECT CAST(:limit AS integer) AS n),",
        )
    )
    return f"""
    gate AS MATERIALIZED (
        SELECT name, key_concurrency, key_rate_limit, key_rate_period FROM queues
        WHERE name = :queue AND {LIMITED} {whole_queue} AND ({DUE})
    ),
    {allowance}
    """


def picked(ending: str) -> str:
    """The keys as visited, each with its free slots (its turn taken and its running jobs
    counted when it is visited; `ending`: the ids of the jobs this statement ends, which
    free theirs; a key whose turn another claim holds has none), and as many of each
    key's due jobs as those allow, locked, by priority (the claim's, in turn) then due
    time; key after key until the claim has all it may take, so that no more keys are
    visited nor jobs locked than it needs. Then the jobs without a key the sweep found."""
    return f"""
    visits AS MATERIALIZED (
        SELECT keys.key, keys.visited, coalesce(turn.slots, 0) AS slots, turn.rate_left,
            turn.opens_in, turn.stamp
        FROM gate CROSS JOIN keys CROSS JOIN LATERAL jobqueue_key_turn(
            gate.name, keys.key, {ending}, gate.key_concurrency, gate.key_rate_limit,
            gate.key_rate_period
        ) AS turn
    ),
    keyed AS MATERIALIZED (
        SELECT job.id, visits.visited, visits.key, visits.stamp
        FROM visits JOIN LATERAL (
            SELECT each.id
            FROM unnest(CAST(:key_priorities AS smallint[])) AS priorities (priority)
            JOIN LATERAL (
                SELECT id FROM jobs
                WHERE status = 'pending'
                  AND queue = :queue
                  AND partition_key = visits.key
                  AND priority = priorities.priority
                  AND run_at <= now()
                  AND type = ANY (CAST(:types AS text[]))
                ORDER BY run_at, id
                LIMIT least(visits.slots, :limit)
                FOR UPDATE SKIP LOCKED
            ) AS each ON true
            LIMIT least(visits.slots, :limit)
        ) AS job ON true
        WHERE visits.slots > 0
        LIMIT (SELECT n FROM allowance)
    ),
    unkeyed AS MATERIALIZED (
        SELECT jobs.id, head.position, head.run_at
        FROM gate, head
        JOIN jobs ON jobs.id = head.id AND jobs.status = 'pending'
        FOR UPDATE OF jobs SKIP LOCKED
    ),
    picked AS MATERIALIZED (
        SELECT id, visited, key, stamp, 0 AS position FROM keyed
        UNION ALL
        SELECT id, 0, NULL, NULL, position FROM unkeyed
    ),
"""


# Of the jobs picked, those the queue's own limits allow (`flow.turn`): the jobs
# without a key the sweep found first (they are found only now and then), then the keys
# in the order visited.
TAKEN = """
    SELECT id, key, stamp, visited FROM picked
    ORDER BY visited, position
    LIMIT (SELECT n FROM allowance)
"""


# When a claimed job starts: with a key rate, at its key's turn's stamp, the window's
# clock (`jobqueue_key_turn`); else at `started`.
def started(started: str) -> str:
    return f"coalesce((SELECT stamp FROM taken WHERE taken.id = jobs.id), {started})"


# The starts of each key the claim took from, written into the key's window
# (`jobqueue_record_key_starts`) under the turn it holds; joined into the statement's
# answer, as a CTE that is not read is not run. None without a key rate.
RECORD = """
    key_recorded AS MATERIALIZED (
        SELECT jobqueue_record_key_starts(
            gate.name, taken.key, gate.key_rate_period, taken.stamp,
            CAST(count(*) AS integer)
        )
        FROM gate JOIN taken ON taken.stamp IS NOT NULL
        GROUP BY gate.name, taken.key, gate.key_rate_period, taken.stamp
    )
"""
RECORDED = "(SELECT count(*) FROM key_recorded)"

# The latest of the claim's keys' stamps, when the queue's own rate records its starts
# (`flow.record`): no job started before it.
LATEST_STAMP = "(SELECT max(stamp) FROM taken)"


# Retention: up to `:limit` keys' windows whose last start has left the queue's key rate
# period, deleted by their row addresses. SKIP LOCKED: a window being written is not.
# A claim that counted a window deleted meanwhile counted nothing in it either.
PRUNE_KEY_STARTS = Statement(
    "prune_key_starts",
    """
    DELETE FROM key_starts
    WHERE ctid = ANY(ARRAY(
        SELECT key_starts.ctid FROM key_starts
        LEFT JOIN queues ON queues.name = key_starts.queue
        WHERE key_starts.starts[cardinality(key_starts.starts)]
            <= now() - coalesce(queues.key_rate_period, interval '0')
        LIMIT :limit
        FOR UPDATE OF key_starts SKIP LOCKED
    ))
    RETURNING 1
    """,
)


# Where the process's next claim of the queue starts: after the last key this one took
# from, or, having taken nothing the queue's own limits allowed, after the last it visited
# (those were full; where it is when they allowed nothing); and, when the keys left it
# short, how many of those it visited, each with jobs waiting, have no free slot now, how
# many of those its rate held back, and when the soonest of their windows lets one more
# start.
NEXT_KEY = """
    coalesce(
        (SELECT key FROM taken WHERE key IS NOT NULL ORDER BY visited DESC LIMIT 1),
        CASE WHEN (SELECT n FROM allowance) > 0 THEN
            (SELECT key FROM keys ORDER BY visited DESC LIMIT 1)
        END
    ) AS next_after_key,
    key_use.keys_full, key_use.keys_rate_spent, key_use.key_rate_opens_in
"""

# The keys a claim left short visited with no free slot left (`NEXT_KEY`), counted. Only
# for a claim left short (a condition PostgreSQL tests once, before reading `visits`):
# reading them all otherwise would visit, and lock, every key the claim could have.
FULL = """
    LEFT JOIN LATERAL (
        SELECT CAST(count(*) AS integer) AS keys_full,
            CAST(count(*) FILTER (WHERE spent.rate_left <= spent.took) AS integer)
                AS keys_rate_spent,
            min(spent.opens_in) FILTER (WHERE spent.rate_left <= spent.took)
                AS key_rate_opens_in
        FROM (
            SELECT visits.slots, visits.rate_left, visits.opens_in,
                (SELECT count(*) FROM taken WHERE taken.key = visits.key) AS took
            FROM visits
            WHERE (SELECT count(*) FROM taken) < (SELECT n FROM allowance)
        ) AS spent
        WHERE spent.slots <= spent.took
    ) AS key_use ON true
"""
