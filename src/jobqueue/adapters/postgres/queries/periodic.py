"""The statements on `periodic_slots`: the last slot each periodic job ran, so that a slot
runs at most once, ever, whatever retention has deleted since (`domain/periodic.py`).

A slot's job is inserted by the statement that advances its schedule's last slot, and
only if it advanced it: every process inserts the same slots, with no leader and no
lock held between statements, and the row's lock orders them; a slot at or before the
last one (a second process, a restart, a clock that went back) inserts nothing.
"""

from __future__ import annotations

from jobqueue.adapters.postgres.queries.inserts import insert_one_if
from jobqueue.adapters.postgres.statement import Statement

# The job of slot `:slot` of schedule `:periodic`, with the id `:id` and the submission's
# fields as `inserts.INSERT_JOB` takes them. The first slot of a schedule makes its row.
INSERT_SLOT_JOB = Statement(
    "insert_slot_job",
    f"""
    WITH advanced AS (
        INSERT INTO periodic_slots (name, last_slot, last_job_id)
        VALUES (:periodic, CAST(:slot AS timestamptz), CAST(:id AS uuid))
        ON CONFLICT (name) DO UPDATE
        SET last_slot = excluded.last_slot,
            last_job_id = excluded.last_job_id,
            updated_at = now()
        WHERE periodic_slots.last_slot < excluded.last_slot
        RETURNING name
    )
    {insert_one_if("advanced")}
    """,
)

# A slot missed while no process ran, made up for (`catch_up`): only for a schedule that
# ran before (it has a row), and only past its last slot.
INSERT_MISSED_SLOT_JOB = Statement(
    "insert_missed_slot_job",
    f"""
    WITH advanced AS (
        UPDATE periodic_slots
        SET last_slot = CAST(:slot AS timestamptz),
            last_job_id = CAST(:id AS uuid),
            updated_at = now()
        WHERE name = :periodic AND last_slot < CAST(:slot AS timestamptz)
        RETURNING name
    )
    {insert_one_if("advanced")}
    """,
)

# Each schedule's last slot, and its job while that exists (retention may have deleted it,
# or another job held its unique key): one primary-key probe of `jobs` per schedule.
LAST_SLOTS = Statement(
    "last_slots",
    """
    SELECT periodic_slots.name, periodic_slots.last_slot, jobs.id AS last_job_id
    FROM periodic_slots
    LEFT JOIN jobs ON jobs.id = periodic_slots.last_job_id
    """,
)
