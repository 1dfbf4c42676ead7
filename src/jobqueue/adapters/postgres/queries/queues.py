"""The statements on `queues`: a row per queue an operator paused or resumed (a queue with
no row runs). The claim reads it by primary key in its own statement (`jobs.CLAIM`), so a
pause holds from its commit on, whatever the processes have heard."""

from __future__ import annotations

from jobqueue.adapters.postgres.queries.sql import quoted
from jobqueue.adapters.postgres.statement import Statement

# Never built from anything a client sent.
PAUSES_CHANNEL = "jobqueue_queues"


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
        RETURNING name, paused_at
    )
    SELECT written.*, pg_notify({quoted(PAUSES_CHANNEL)}, '') AS announced FROM written
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

QUEUE_STATES = Statement("queue_states", "SELECT name, paused_at FROM queues")
QUEUE_STATE = Statement("queue_state", "SELECT name, paused_at FROM queues WHERE name = :name")
