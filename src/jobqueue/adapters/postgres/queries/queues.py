"""The statements on `queues`: a row per queue an operator paused, resumed or limited, or
whose limits settings declared (a queue with no row runs, unlimited). The claim reads it
by primary key in its own statement (`claims.py`, `flow.py`), so a pause or a limit
holds from its commit on, whatever the processes have heard."""

from __future__ import annotations

from jobqueue.adapters.postgres.queries.sql import quoted
from jobqueue.adapters.postgres.statement import Statement
from jobqueue.domain.flow import MAX_CONCURRENCY

# Never built from anything a client sent.
PAUSES_CHANNEL = "jobqueue_queues"


# A queue's state as `QueueState` holds it: its pause, its limits, and their use now (the
# running jobs, from the small index of running jobs, only for a concurrency limit, on
# the queue or per key; the starts within the rate's window, from the row), read from a
# row of `queues`; its rated types from the rows of `rated` (`type_rates`, or the rows a
# statement just wrote), each as [type, limit, period in seconds, starts in its window].
def _state(rated: str = "type_rates") -> str:
    return f"""
    queues.name, queues.paused_at,
    queues.concurrency, queues.rate_limit, queues.rate_period, queues.limits_source,
    queues.key_concurrency, queues.key_rate_limit, queues.key_rate_period,
    CASE WHEN queues.concurrency IS NOT NULL OR queues.key_concurrency IS NOT NULL THEN (
        SELECT count(*) FROM (
            SELECT FROM jobs WHERE jobs.queue = queues.name AND jobs.status = 'processing'
            LIMIT {MAX_CONCURRENCY}
        ) AS running
    ) END AS running,
    CASE WHEN queues.rate_limit IS NOT NULL THEN (
        SELECT coalesce(sum(started.n), 0)
        FROM unnest(queues.starts, queues.start_counts) AS started (at, n)
        WHERE started.at > clock_timestamp() - queues.rate_period
    ) END AS started,
    CASE WHEN queues.type_rated THEN (
        SELECT jsonb_agg(jsonb_build_array(
            rated.type, rated.rate_limit, extract(epoch FROM rated.rate_period), (
                SELECT coalesce(sum(started.n), 0)
                FROM unnest(rated.starts, rated.start_counts) AS started (at, n)
                WHERE started.at > clock_timestamp() - rated.rate_period
            )
        ) ORDER BY rated.type)
        FROM {rated} AS rated WHERE rated.queue = queues.name
    ) END AS type_rates
"""


_STATE = _state()


# Pausing and resuming tell every worker process, by NOTIFY in the same statement,
# delivered at commit; workers also re-read the pauses every PAUSE_CHECK_INTERVAL in case
# a notification was lost. Pausing a paused queue keeps its first `paused_at`.
def _set(paused_at: str, kept: str) -> str:
    return f"""
    WITH written AS (
        INSERT INTO queues (name, paused_at, updated_at)
        VALUES (:name, {paused_at}, now())
        ON CONFLICT (name) DO UPDATE
        SET paused_at = {kept}, updated_at = now()
        RETURNING *
    )
    SELECT {_STATE}, pg_notify({quoted(PAUSES_CHANNEL)}, '') AS announced
    FROM written AS queues
    """


PAUSE_QUEUE = Statement("pause_queue", _set("now()", "coalesce(queues.paused_at, now())"))
RESUME_QUEUE = Statement("resume_queue", _set("NULL", "NULL"))

PAUSED_AMONG = Statement(
    "paused_among",
    """
    SELECT name FROM queues
    WHERE name = ANY(CAST(:names AS text[])) AND paused_at IS NOT NULL
    """,
)

QUEUE_STATES = Statement("queue_states", f"SELECT {_STATE} FROM queues")
QUEUE_STATE = Statement("queue_state", f"SELECT {_STATE} FROM queues WHERE name = :name")


def _limits_written(condition: str) -> str:
    """A queue's limits written (its row made if need be, and a row of `type_rates` per
    rated type, whose window is kept when only its rate changes), where `condition` holds
    of the row there was; its state returned, and the change announced to the worker processes
    as a pause is (a pool resting after a claim a limit held back claims again at once)."""
    return f"""
    WITH written AS (
        INSERT INTO queues (
            name, concurrency, rate_limit, rate_period, key_concurrency, key_rate_limit,
            key_rate_period, type_rated, limits_source, updated_at
        )
        VALUES (
            :name, :concurrency, :rate_limit, CAST(:rate_period AS interval),
            :key_concurrency, :key_rate_limit, CAST(:key_rate_period AS interval),
            cardinality(CAST(:rated_types AS text[])) > 0, :source, now()
        )
        ON CONFLICT (name) DO UPDATE
        SET concurrency = excluded.concurrency,
            type_rated = excluded.type_rated,
            key_concurrency = excluded.key_concurrency,
            key_rate_limit = excluded.key_rate_limit,
            key_rate_period = excluded.key_rate_period,
            rate_limit = excluded.rate_limit,
            rate_period = excluded.rate_period,
            limits_source = excluded.limits_source,
            updated_at = now()
        WHERE {condition}
        RETURNING *
    ),
    unrated AS (
        DELETE FROM type_rates
        WHERE queue = :name
          AND type <> ALL(CAST(:rated_types AS text[]))
          AND EXISTS (SELECT FROM written)
    ),
    rated AS (
        INSERT INTO type_rates (queue, type, rate_limit, rate_period)
        SELECT :name, given.type, given.rate_limit, given.rate_period
        FROM unnest(
            CAST(:rated_types AS text[]),
            CAST(:rated_limits AS integer[]),
            CAST(:rated_periods AS interval[])
        ) AS given (type, rate_limit, rate_period)
        WHERE EXISTS (SELECT FROM written)
        ON CONFLICT (queue, type) DO UPDATE
        SET rate_limit = excluded.rate_limit, rate_period = excluded.rate_period
        RETURNING *
    )
    SELECT {_state("rated")}, pg_notify({quoted(PAUSES_CHANNEL)}, '') AS announced
    FROM written AS queues
    """


# An operator's limits for a queue, or none (all NULL, and no source): they hold until an
# operator changes them again, whatever settings declare.
SET_LIMITS = Statement("set_queue_limits", _limits_written("true"))

# Limits declared in a process's settings, written as it starts, unless an operator's
# stand (then the row is left alone, and none is returned).
DECLARE_LIMITS = Statement(
    "declare_queue_limits",
    _limits_written("queues.limits_source IS DISTINCT FROM 'operator'"),
)

# Settings that declare no limits for a queue lift those settings declared before.
UNDECLARE_LIMITS = Statement(
    "undeclare_queue_limits",
    """
    WITH undeclared AS (
        UPDATE queues
        SET concurrency = NULL, rate_limit = NULL, rate_period = NULL, key_concurrency = NULL,
            key_rate_limit = NULL, key_rate_period = NULL, type_rated = false,
            limits_source = NULL, updated_at = now()
        WHERE name = :name AND limits_source = 'settings'
        RETURNING name
    )
    DELETE FROM type_rates WHERE queue IN (SELECT name FROM undeclared)
    """,
)
