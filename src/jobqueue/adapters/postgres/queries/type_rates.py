"""The parts of a typed claim (`claims.TYPED_CLAIM`, `claims.RECORD_AND_TYPED_CLAIM`: a
limited claim with these) that pace a queue's rated job types (`type_rates`, migration
0022), each at most so many starts within any window of its period, across every process.

Before it reads a due job, the claim takes the turn of each rated type it runs
(`jobqueue_type_turn`): the type's advisory lock, tried, so that claims of one type take
turns from there to their commit, and a claim that finds the turn held leaves that
type's jobs to the claim holding it (no claim ever waits on another for a type, so none
can deadlock on two); then the window, read after the lock. Each range of a rated type
is read up to what the window has left, so a spent type's range reads nothing and the
claim goes on to the queue's other types; the same type in several ranges (priorities)
is trimmed to its window in claim order (`ALLOWED`). What the claim took of each type is
written last (`RECORDED`), still under the turns.

The jobs of a rated type start at the later of their type's turn and the queue's
(`started`), and are written into the window at that time: a window must never hold a
start earlier than the job's `started_at`, nor can a turn be counted later than when it
read the window. A queue without type rates (`queues.type_rated` false) is not claimed
with these parts at all (`claims.LIMITED_CLAIM` refuses one that has them).
"""

from __future__ import annotations

# Each rated type among the claim's types, its turn taken (`slots` NULL: no cap; `stamp`
# NULL: no turn).
TURNS = """
    type_turns AS MATERIALIZED (
        SELECT rated.type, turn.slots, turn.opens_in, turn.stamp
        FROM type_rates AS rated
        CROSS JOIN LATERAL jobqueue_type_turn(rated.queue, rated.type) AS turn
        WHERE rated.queue = :queue
          AND rated.type = ANY(CAST(:types AS text[]))
          AND EXISTS (SELECT FROM queue WHERE type_rated)
    ),
"""

# How many of a range's due jobs the claim reads: what its type's window has left.
RANGE_LIMIT = (
    "least(:limit, coalesce((SELECT slots FROM type_turns WHERE type = ranges.type), :limit))"
)

# The due jobs a claim locked (`due`: id, run_at, position, type), less those of each
# rated type past what its window has left, in claim order.
ALLOWED = """
    allowed AS MATERIALIZED (
        SELECT due.id, due.run_at, due.position
        FROM (
            SELECT due.*, row_number() OVER (
                PARTITION BY due.type ORDER BY due.position, due.run_at, due.id
            ) AS nth
            FROM due
        ) AS due
        LEFT JOIN type_turns ON type_turns.type = due.type
        WHERE type_turns.slots IS NULL OR due.nth <= type_turns.slots
    ),
"""


def started(queue_started: str) -> str:
    """When a claimed job starts: at `queue_started` (the queue's turn, or now), or at its
    type's turn if later."""
    return f"""greatest(
        {queue_started}, (SELECT stamp FROM type_turns WHERE type_turns.type = jobs.type)
    )"""


# The starts each type's turn let through, written into its window at their
# `started_at` (the windows of types that took nothing are only cleared of old starts);
# whether the type had none left once the claim was done (`spent`), and when its window
# lets one more start.
RECORDED = """
    type_recorded AS MATERIALIZED (
        SELECT turns.slots <= took.n AS spent, turns.opens_in,
            jobqueue_record_type_starts(
                :queue, turns.type, greatest((SELECT stamp FROM allowance), turns.stamp), took.n
            ) AS written
        FROM type_turns AS turns
        CROSS JOIN LATERAL (
            SELECT CAST(count(*) AS integer) AS n FROM claimed WHERE claimed.type = turns.type
        ) AS took
        WHERE turns.stamp IS NOT NULL
    ),
    type_left AS (
        SELECT CASE WHEN count(*) > 0 THEN CAST(count(*) FILTER (WHERE spent) AS integer) END
                AS types_rate_spent,
            min(opens_in) FILTER (WHERE spent) AS type_rate_opens_in
        FROM type_recorded
    )
"""

# What the types' windows had left, as a claim answers it (`RECORDED` must be run, and
# is, as `type_left` is read).
LEFT = "type_left.types_rate_spent, type_left.type_rate_opens_in"
NONE_LEFT = (
    "CAST(NULL AS integer) AS types_rate_spent, CAST(NULL AS interval) AS type_rate_opens_in"
)
