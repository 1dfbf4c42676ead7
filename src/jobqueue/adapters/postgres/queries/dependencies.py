"""The statements of jobs that wait for jobs (`domain/dependencies.py`): a graph's insert
(the jobs themselves: `inserts.INSERT_GRAPH`), the stored dependencies it locks and
marks, its edges, and the results a dependent's handler reads. The release of
dependents is no statement of ours: migrations 0024 and 0025's triggers do it within
whatever statement ends a job.
"""

from __future__ import annotations

from jobqueue.adapters.postgres.statement import Statement

# The stored jobs a graph depends on, locked in id order until the graph's commit: each
# one ending meanwhile waits for it, and then finds the graph's edges; one that ended
# before is read ended. In id order, so that two graphs sharing dependencies lock them
# alike.
LOCK_DEPENDENCIES = Statement(
    "lock_dependencies",
    """
    SELECT id, status, workflow_id FROM jobs
    WHERE id = ANY(CAST(:ids AS uuid[]))
    ORDER BY id
    FOR UPDATE
    """,
)

# Those jobs have dependents now (their endings release them), and join the graph's
# workflow unless in one already. Not an indexed column: the new row version stays on
# its page.
MARK_DEPENDENCIES = Statement(
    "mark_dependencies",
    """
    UPDATE jobs
    SET has_dependents = true,
        workflow_id = coalesce(jobs.workflow_id, CAST(:workflow_id AS uuid))
    WHERE id = ANY(CAST(:ids AS uuid[]))
    """,
)

# Who waits for whom, a row per live dependency of each count (`dependencies.waits_of`):
# `:dependents` are the counts' ids. Kept until that dependency is deleted.
# Written in the order an ending reads them, a dependency's together: its edges then
# share a page or two instead of one each (a fan's lookups took half the time, measured).
INSERT_EDGES = Statement(
    "insert_edges",
    """
    INSERT INTO job_dependencies (depends_on, job_id)
    SELECT * FROM unnest(CAST(:dependencies AS uuid[]), CAST(:dependents AS uuid[]))
        AS edge (depends_on, job_id)
    ORDER BY edge.depends_on
    ON CONFLICT DO NOTHING
    """,
)

# The counts the jobs a graph inserts waiting wait on (`job_waits`, migrations 0025 and
# 0026): a job's own, or one shared by the jobs waiting for the same dependencies.
# Written here rather than by an insert trigger, which every other insert would pay for.
INSERT_WAITS = Statement(
    "insert_waits",
    """
    INSERT INTO job_waits (job_id, remaining)
    SELECT * FROM unnest(CAST(:ids AS uuid[]), CAST(:counts AS integer[]))
    """,
)

# What a dependent's handler reads of the jobs it depended on, by primary key.
DEPENDENCY_RESULTS = Statement(
    "dependency_results",
    """
    SELECT id, type, status, result, last_error FROM jobs
    WHERE id = ANY(CAST(:ids AS uuid[]))
    """,
)
