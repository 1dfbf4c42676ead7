"""The claims: a queue's due jobs taken by a process, alone or with a batch of endings in
the same statement, for a queue without limits (`CLAIM`, `RECORD_AND_CLAIM`), for one
with limits on the whole queue (`LIMITED_CLAIM`, `RECORD_AND_LIMITED_CLAIM`, whose extra
parts are in `flow.py`), with rates of its types as well or alone (`TYPED_CLAIM`,
`RECORD_AND_TYPED_CLAIM`, `type_rates.py`), with a per-key limit (`KEYED_CLAIM`,
`RECORD_AND_KEYED_CLAIM`, `keys.py`), and with both (`LIMITED_KEYED_CLAIM`,
`RECORD_AND_LIMITED_KEYED_CLAIM`).

A statement per kind rather than one that serves all: the limits' parts cost a claim of a
queue without limits about 0.2 ms of execution and 0.3 ms of planning (a third of the
statement), measured, and most queues have none; those of the whole queue cost a keyed
claim a third of its planning. The store picks the statement by what the queue's last
claim said (`limited`, `type_rated` and `keyed` on every row); a claim refuses a queue
that has limits its statement does not count (the same primary-key probe as the pause),
so no claim ever takes a limited queue's jobs without counting, and the store claims
again with the right statement at once. Type rates have statements of their own too:
their parts (the types' turns, the trim, the windows written) cost a limited claim of a
queue without them about a tenth of a non-binding drain (bench/RESULTS.md).
"""

from __future__ import annotations

from jobqueue.adapters.postgres.queries import flow, keys, type_rates
from jobqueue.adapters.postgres.queries.jobs import ENDINGS
from jobqueue.adapters.postgres.queries.sql import in_ranges
from jobqueue.adapters.postgres.statement import Statement

# The queue's row as every claim reads it, once, by primary key: whether it is paused,
# whether it has limits on the whole queue or rates of its types (`limited`), rates of
# its types (`type_rated`), and a per-key limit (`keyed`): the claim of a queue without
# limits takes nothing of one that has them, nor the limited claim of one with type
# rates, and every claim answers which it found.
_QUEUE = f"""
    queue AS MATERIALIZED (
        SELECT paused_at IS NOT NULL AS paused,
            concurrency IS NOT NULL OR rate_limit IS NOT NULL OR type_rated AS limited,
            type_rated,
            {keys.KEYED} AS keyed
        FROM queues WHERE name = :queue
    )
"""


# One queue's due jobs, in the ranges the claim is given (`sql.in_ranges`). The outer
# LIMIT stops the nested loop once enough rows came back, and rows are locked only as
# they are pulled, so no more than asked are locked, and a range is not read at all once
# those before it filled the claim. Each range starts after the last job this process
# claimed there (`claim_cursor.py`), past the dead entries claims leave behind. A paused
# queue claims nothing, and the claim of a queue without limits nothing of one that has
# them (`held`, of `_QUEUE`).
#
# MATERIALIZED fences the locking subquery: inlined, the planner may evaluate it more
# than once and claim more rows than asked. SKIP LOCKED lets concurrent claimers pass
# each other's rows instead of queueing behind them. FOR UPDATE rechecks the filter on
# the newest row version, so every row locked here is still pending and stays so until
# the statement commits: the UPDATE needs no guard.
def _due(held: str, limit: str = ":limit") -> str:
    return f"""
    SELECT picked.id, picked.run_at, ranges.position, ranges.type
    {in_ranges("id, run_at", "after", limit, "FOR UPDATE SKIP LOCKED")}
    WHERE NOT EXISTS (SELECT FROM queue WHERE {held})
    LIMIT :limit
    """


# A queue with limits of the whole queue alone, as its claim sees it; one with type
# rates too, read up to what each rated type's window has left (`type_rates.py`).
_DUE = _due("paused OR keyed OR type_rated")
_DUE_TYPED = _due("paused OR keyed", type_rates.RANGE_LIMIT)
# A queue without limits, as its claim sees it: not paused, and still without limits.
_DUE_UNLIMITED = _due("paused OR limited OR keyed")


def _taken(source: str) -> str:
    """Of the jobs a limited claim locked (in `source`), those the queue's limits allow
    (`flow.py`), in the order read."""
    return f"""
    SELECT id FROM {source} ORDER BY position, run_at, id LIMIT (SELECT n FROM allowance)
    """


# The claim itself: each job of `source` becomes this attempt's, its lease and fencing
# token new, the attempt counted now (so a job that kills its process still runs out),
# started at `started` (a limited claim's stamp: its rate's clock; a keyed claim's, its
# key's, read from `taken` by the job's id). The jobs are found by their ids in
# the primary key, not by a join with `source`: with the statistics of a table
# analyzed while nearly empty, the planner estimated one row on both sides of the join
# and now and then scanned every job for the ten it claims.
def _take(source: str, started: str) -> str:
    return f"""
    UPDATE jobs
    SET status = 'processing',
        attempts = jobs.attempts + 1,
        lease_token = jobs.lease_token + 1,
        locked_until = now() + CAST(:lease AS interval),
        updated_at = now(),
        started_at = {started},
        worker = :worker
    WHERE jobs.id = ANY(ARRAY(SELECT id FROM {source}))
    RETURNING jobs.*
    """


# What every claim returns besides its jobs (a row per job taken, or one without a job
# when it took none): whether the queue has limits now (the store's choice of statement
# for its next claim), and what the limits had left (NULL without them, `flow.py`).
_LIMITED_NOW = (
    "EXISTS (SELECT FROM queue WHERE limited) AS limited,"
    " EXISTS (SELECT FROM queue WHERE type_rated) AS type_rated,"
    " EXISTS (SELECT FROM queue WHERE keyed) AS keyed"
)
_LEFT = "allowance.concurrency_left, allowance.rate_left, allowance.rate_opens_in"
_NO_KEYS = (
    "CAST(NULL AS text) AS next_after_key, CAST(NULL AS integer) AS keys_full,"
    " CAST(NULL AS integer) AS keys_rate_spent, CAST(NULL AS interval) AS key_rate_opens_in"
)
_NO_LEFT = (
    "CAST(NULL AS integer) AS concurrency_left, CAST(NULL AS integer) AS rate_left,"
    " CAST(NULL AS interval) AS rate_opens_in"
)
_NONE_LEFT = f"{_NO_LEFT}, {_NO_KEYS}, {type_rates.NONE_LEFT}"
# The leases a batch of endings held, as two arrays, returned on the first row only
# (`_HELD_ONCE`): on every row, a claim of n jobs carrying m endings sent n × m ids and
# tokens, all decoded by the process, for a third of the time of a round of 100 endings
# and 100 claims (bench/RESULTS.md, "Endings' leases returned once").
_HELD = """
    SELECT array_agg(ended.id) AS ended_ids, array_agg(ended.lease_token) AS ended_tokens
    FROM ended
"""
_HELD_ONCE = (
    "CASE WHEN row_number() OVER () = 1 THEN held.ended_ids END AS ended_ids,"
    " CASE WHEN row_number() OVER () = 1 THEN held.ended_tokens END AS ended_tokens"
)

CLAIM = Statement(
    "claim",
    f"""
    WITH {_QUEUE}, due AS MATERIALIZED ({_DUE_UNLIMITED}),
    claimed AS ({_take("due", "now()")})
    SELECT {_LIMITED_NOW}, {_NONE_LEFT}, claimed.* FROM (SELECT) AS one LEFT JOIN claimed ON true
    """,
)


def _limited(ending: str, *, typed: bool) -> str:
    """The CTEs of a claim of a queue with limits of the whole queue: the due jobs
    locked, the queue's turn, the jobs taken. `typed`, for a queue with type rates: the
    types' turns first, the due jobs trimmed to them, the types' starts written last."""
    if not typed:
        return f"""
        {_QUEUE}, due AS MATERIALIZED ({_DUE}),
        {flow.turn(ending, "(SELECT count(*) FROM due)", record=True)}
        taken AS MATERIALIZED ({_taken("due")}),
        claimed AS ({_take("taken", flow.STARTED)})
        """
    return f"""
    {_QUEUE}, {type_rates.TURNS}
    due AS MATERIALIZED ({_DUE_TYPED}), {type_rates.ALLOWED}
    {flow.turn(ending, "(SELECT count(*) FROM allowed)", record=True)}
    taken AS MATERIALIZED ({_taken("allowed")}),
    claimed AS ({_take("taken", type_rates.started(flow.STARTED))}),
    {type_rates.RECORDED}
    """


def _limited_claim(name: str, *, typed: bool) -> Statement:
    types_left, left_of = (
        (type_rates.LEFT, "allowance CROSS JOIN type_left")
        if typed
        else (type_rates.NONE_LEFT, "allowance")
    )
    return Statement(
        name,
        f"""
        WITH {_limited("CAST(ARRAY[] AS uuid[])", typed=typed)}
        SELECT {_LIMITED_NOW}, {_LEFT}, {_NO_KEYS}, {types_left}, claimed.*
        FROM {left_of} LEFT JOIN claimed ON true
        """,
    )


LIMITED_CLAIM = _limited_claim("limited_claim", typed=False)
TYPED_CLAIM = _limited_claim("typed_claim", typed=True)

# A batch of endings and the next claim in one statement: one round trip and one commit
# where a busy pool would spend two. The two parts touch disjoint rows (the endings' jobs
# are processing in the statement's snapshot, the claim takes only pending ones), so
# neither sees nor needs the other's effects (but for a limited claim's slots, which the
# endings free: `flow.turn`). The claimed rows are LEFT JOINed so that a claim
# finding nothing still returns one row carrying the leases that held.
RECORD_AND_CLAIM = Statement(
    "record_endings_and_claim",
    f"""
    WITH ended AS ({ENDINGS}),
    {_QUEUE},
    due AS MATERIALIZED ({_DUE_UNLIMITED}),
    claimed AS ({_take("due", "now()")})
    SELECT {_HELD_ONCE}, {_LIMITED_NOW}, {_NONE_LEFT}, claimed.*
    FROM ({_HELD}) AS held
    LEFT JOIN claimed ON true
    """,
)


def _record_and_limited_claim(name: str, *, typed: bool) -> Statement:
    types_left, type_left = (
        (type_rates.LEFT, "CROSS JOIN type_left") if typed else (type_rates.NONE_LEFT, "")
    )
    return Statement(
        name,
        f"""
        WITH ended AS ({ENDINGS}),
        {_limited("ARRAY(SELECT id FROM ended)", typed=typed)}
        SELECT {_HELD_ONCE}, {_LIMITED_NOW}, {_LEFT}, {_NO_KEYS},
            {types_left}, claimed.*
        FROM ({_HELD}) AS held
        CROSS JOIN allowance
        {type_left}
        LEFT JOIN claimed ON true
        """,
    )


RECORD_AND_LIMITED_CLAIM = _record_and_limited_claim(
    "record_endings_and_limited_claim", typed=False
)
RECORD_AND_TYPED_CLAIM = _record_and_limited_claim("record_endings_and_typed_claim", typed=True)


# A queue with a per-key limit (`keys.py`): the keys visited and the head's jobs without
# one read first, then each key's slots counted and its jobs locked. With limits on the
# whole queue too, the queue's turn is taken before the keys' (`flow.turn`), those limits
# cap the whole, and the starts are written last (`flow.record`); without them, the
# queue's row is only read, and the claim refuses a queue that has them since.
def _keyed(ending: str, limited: bool) -> str:
    if limited:
        gate = f"{keys.gate(limited=True)} {flow.turn(ending, keys.GATED, record=False)}"
        started, after = flow.STARTED, f", {flow.record(keys.LATEST_STAMP)}"
    else:
        gate, started, after = keys.gate(limited=False), "now()", ""
    return f"""
    {keys.KEYS} {keys.HEAD} {gate} {keys.picked(ending)}
    taken AS MATERIALIZED ({keys.TAKEN}),
    claimed AS ({_take("taken", keys.started(started))}),
    {keys.RECORD} {after}
    """


# The turn's answer, with the starts written once the claim is known (`flow.record`).
_RECORDED = "(allowance LEFT JOIN recorded ON true)"
# What held the keys back (`keys.FULL`), and the claimed jobs joined on a condition that
# reads the keys' windows written (`keys.RECORD`): always true, it makes every claim
# run that CTE, once.
_KEYS_RECORDED = f"{keys.FULL} LEFT JOIN claimed ON {keys.RECORDED} >= 0"


def _keyed_claim(name: str, limited: bool) -> Statement:
    left, limits = (_LEFT, _RECORDED) if limited else (_NO_LEFT, "(SELECT) AS one")
    return Statement(
        name,
        f"""
        WITH RECURSIVE {_QUEUE}, {_keyed("CAST(ARRAY[] AS uuid[])", limited)}
        SELECT {_LIMITED_NOW}, {left}, {keys.NEXT_KEY}, {keys.HEAD_ENDS},
            {type_rates.NONE_LEFT}, claimed.*
        FROM {limits} {_KEYS_RECORDED}
        """,
    )


def _record_and_keyed_claim(name: str, limited: bool) -> Statement:
    left, limits = (_LEFT, f"CROSS JOIN {_RECORDED}") if limited else (_NO_LEFT, "")
    return Statement(
        name,
        f"""
        WITH RECURSIVE ended AS ({ENDINGS}),
        {_QUEUE}, {_keyed("ARRAY(SELECT id FROM ended)", limited)}
        SELECT {_HELD_ONCE}, {_LIMITED_NOW}, {left}, {keys.NEXT_KEY},
            {keys.HEAD_ENDS}, {type_rates.NONE_LEFT}, claimed.*
        FROM ({_HELD}) AS held
        {limits}
        {_KEYS_RECORDED}
        """,
    )


KEYED_CLAIM = _keyed_claim("keyed_claim", limited=False)
RECORD_AND_KEYED_CLAIM = _record_and_keyed_claim("record_endings_and_keyed_claim", False)
LIMITED_KEYED_CLAIM = _keyed_claim("limited_keyed_claim", limited=True)
RECORD_AND_LIMITED_KEYED_CLAIM = _record_and_keyed_claim(
    "record_endings_and_limited_keyed_claim", True
)
