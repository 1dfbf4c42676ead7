"""The statements of a workflow (`domain/dependencies.py`): its jobs, its cancel, and the
retry of its steps that ended without completing. Each reads the workflow's jobs through
`ix_jobs_workflow`, at most `:limit` of them."""

from __future__ import annotations

from jobqueue.adapters.postgres.queries.jobs import cancelling, retried
from jobqueue.adapters.postgres.queries.sql import among, listed
from jobqueue.adapters.postgres.statement import Statement
from jobqueue.domain.bulk import ACTIONABLE, CANCELLABLE
from jobqueue.domain.status import LIVE

# In submission order, as the index holds them.
WORKFLOW_JOBS = Statement(
    "workflow_jobs",
    f"""
    SELECT {listed()} FROM jobs
    WHERE workflow_id = :workflow_id
    ORDER BY created_at, id
    LIMIT :limit
    """,
)

# Whether it has a job: what an action that acted on none says next.
WORKFLOW_EXISTS = Statement(
    "workflow_exists", "SELECT 1 FROM jobs WHERE workflow_id = :workflow_id LIMIT 1"
)

# Its live jobs, cancelled as an operator's cancel does (running ones told), locked in id
# order. Their dependents in the workflow are live too, and cancelled with them; the
# release (migration 0024) finds them ended already.
CANCEL_WORKFLOW = Statement(
    "cancel_workflow",
    f"""
    WITH target AS MATERIALIZED (
        SELECT id, status AS was FROM jobs
        WHERE workflow_id = :workflow_id AND status IN ({among(CANCELLABLE)})
        ORDER BY id
        LIMIT :limit
        FOR UPDATE
    ),
    {cancelling("target", "jobs.id")}
    """,
)

# Its steps that ended without completing, retried together: each waits again for those
# of its dependencies that are live once the retry is written (retried with it, or live
# already, locked so that none ends before the new edges are seen), else is pending. Its
# count starts at those live already: the retried ones, like every retried job with
# dependents, are counted back on by migration 0025's release, for each dependent waiting
# then (a job of the workflow still waiting, a callback run anyway, too). An edge to a
# still-waiting job from a retried step it did not wait for when submitted is added, so
# that it waits for it now (its count's, when shared: migration 0026). A retried step
# waits on a count of its own. A dependency outside the workflow that did not complete
# is not waited for again.
RETRY_WORKFLOW = Statement(
    "retry_workflow",
    f"""
    WITH retried AS MATERIALIZED (
        SELECT id, depends_on FROM jobs
        WHERE workflow_id = :workflow_id AND status IN ({among(ACTIONABLE)})
        ORDER BY id
        LIMIT :limit
        FOR UPDATE
    ),
    live AS MATERIALIZED (
        SELECT jobs.id FROM jobs
        WHERE jobs.id IN (SELECT unnest(depends_on) FROM retried)
          AND jobs.status IN ({among(LIVE)})
        ORDER BY jobs.id
        FOR UPDATE
    ),
    still_waiting AS MATERIALIZED (
        SELECT id, wait_id, depends_on FROM jobs
        WHERE workflow_id = :workflow_id AND status = 'waiting'
        ORDER BY id
        LIMIT :limit
        FOR UPDATE
    ),
    edges AS MATERIALIZED (
        SELECT dependency, retried.id AS job_id
        FROM retried, unnest(retried.depends_on) AS dependency
        WHERE dependency IN (SELECT id FROM retried) OR dependency IN (SELECT id FROM live)
        UNION ALL
        SELECT dependency, coalesce(still_waiting.wait_id, still_waiting.id)
        FROM still_waiting, unnest(still_waiting.depends_on) AS dependency
        WHERE dependency IN (SELECT id FROM retried)
    ),
    linked AS (
        INSERT INTO job_dependencies (depends_on, job_id)
        SELECT dependency, job_id FROM edges
        ON CONFLICT DO NOTHING
    ),
    counted AS (
        SELECT retried.id, count(edges.job_id) AS n,
            count(edges.job_id) FILTER (WHERE edges.dependency IN (SELECT id FROM live))
                AS live_already
        FROM retried LEFT JOIN edges ON edges.job_id = retried.id
        GROUP BY retried.id
    )
    UPDATE jobs
    SET {retried("CASE WHEN counted.n > 0 THEN 'waiting' ELSE 'pending' END")},
        waiting_for = counted.live_already,
        wait_id = NULL
    FROM counted
    WHERE jobs.id = counted.id
    RETURNING jobs.id
    """,
)
