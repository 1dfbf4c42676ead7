"""The statements on `processes` (a row per live worker process, refreshed by its
heartbeats) and what they tell about queues: how many processes consume each, and which
have due jobs that no live process consumes."""

from __future__ import annotations

from jobqueue.adapters.postgres.statement import Statement

# A process's heartbeat: its row written again with a new expiry, and the rows of
# processes whose expiry passed (killed, or cut off) removed by whoever beats next.
# SKIP LOCKED: two processes removing the same dead rows never wait on each other.
HEARTBEAT = Statement(
    "heartbeat",
    """
    WITH gone AS (
        DELETE FROM processes
        WHERE id IN (
            SELECT id FROM processes
            WHERE expires_at < now() AND id <> :id
            FOR UPDATE SKIP LOCKED
        )
    )
    INSERT INTO processes
        (id, host, pid, version, queues, types, concurrency, queue_concurrency, running,
         heartbeat_at, expires_at)
    VALUES (
        :id, :host, :pid, :version, CAST(:queues AS text[]), CAST(:types AS text[]),
        :concurrency, CAST(:queue_concurrency AS integer[]), :running,
        now(), now() + CAST(:ttl AS interval)
    )
    ON CONFLICT (id) DO UPDATE
    SET queues = EXCLUDED.queues,
        types = EXCLUDED.types,
        concurrency = EXCLUDED.concurrency,
        queue_concurrency = EXCLUDED.queue_concurrency,
        running = EXCLUDED.running,
        heartbeat_at = now(),
        expires_at = EXCLUDED.expires_at
    """,
)

LEAVE = Statement("leave", "DELETE FROM processes WHERE id = :id")

# A scan of `processes`, which holds the live processes and those expired since the last
# heartbeat of any (it removes them): as many rows as the fleet, never the jobs.
LIVE_PROCESSES = Statement(
    "live_processes",
    """
    SELECT *, now() AS read_at FROM processes
    WHERE expires_at > now()
    ORDER BY host, pid, started_at
    """,
)

CONSUMERS_BY_QUEUE = Statement(
    "consumers_by_queue",
    """
    SELECT queue, count(*) AS consumers
    FROM processes, unnest(queues) AS queue
    WHERE expires_at > now()
    GROUP BY queue
    """,
)

# Due jobs counted up to this many for a warning: enough to say how bad it is, bounded.
DUE_COUNTED_UP_TO = 1000

# Queues whose jobs have waited `:grace` past due while no live process consumes them,
# each returned once: the first caller to flag the queue's `unconsumed_warned_at` gets it
# (a compare-and-swap, so one process of many warns), and the flag is cleared once the
# queue is consumed again or has nothing overdue, ready for the next episode.
#
# The queues with pending jobs come from a loose scan of ix_jobs_due_by_type (it leads
# with the queue): one index probe per queue, however many jobs wait in each. Only the
# queues no live process consumes are then probed for an overdue job.
NEWLY_UNCONSUMED = Statement(
    "newly_unconsumed",
    f"""
    WITH RECURSIVE waiting(queue) AS (
        (SELECT queue FROM jobs WHERE status = 'pending' ORDER BY queue LIMIT 1)
        UNION ALL
        SELECT (
            SELECT jobs.queue FROM jobs
            WHERE jobs.status = 'pending' AND jobs.queue > waiting.queue
            ORDER BY jobs.queue LIMIT 1
        )
        FROM waiting WHERE waiting.queue IS NOT NULL
    ),
    consumed AS (
        SELECT DISTINCT unnest(queues) AS queue FROM processes WHERE expires_at > now()
    ),
    stuck AS (
        SELECT waiting.queue,
            (SELECT count(*) FROM (
                SELECT 1 FROM jobs
                WHERE status = 'pending' AND queue = waiting.queue AND run_at <= now()
                LIMIT {DUE_COUNTED_UP_TO}
            ) AS due) AS due
        FROM waiting
        WHERE waiting.queue IS NOT NULL
          AND waiting.queue NOT IN (SELECT queue FROM consumed)
          AND EXISTS (
              SELECT 1 FROM jobs
              WHERE status = 'pending' AND queue = waiting.queue
                AND run_at <= now() - CAST(:grace AS interval)
          )
    ),
    warned AS (
        INSERT INTO queues (name, unconsumed_warned_at)
        SELECT queue, now() FROM stuck
        ON CONFLICT (name) DO UPDATE SET unconsumed_warned_at = now()
        WHERE queues.unconsumed_warned_at IS NULL
        RETURNING name
    ),
    cleared AS (
        UPDATE queues SET unconsumed_warned_at = NULL
        WHERE unconsumed_warned_at IS NOT NULL AND name NOT IN (SELECT queue FROM stuck)
    )
    SELECT stuck.queue, stuck.due FROM stuck JOIN warned ON warned.name = stuck.queue
    ORDER BY stuck.queue
    """,
)
