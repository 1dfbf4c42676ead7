"""The statements on `job_types`: what workers published about the types they run, so that
an API process without their code can check submissions (`domain/job_types.py`)."""

from __future__ import annotations

from jobqueue.adapters.postgres.statement import Statement

# A worker's types, each replacing what an earlier worker said of it, in one statement.
# In name order (the caller sorts them), so workers starting together wait for each
# other's rows instead of deadlocking.
PUBLISH_TYPES = Statement(
    "publish_types",
    """
    INSERT INTO job_types (name, payload_schema, options, description, published_by)
    SELECT published.name, CAST(published.payload_schema AS jsonb),
        CAST(published.options AS jsonb), published.description, :published_by
    FROM unnest(
        CAST(:names AS text[]),
        CAST(:payload_schemas AS text[]),
        CAST(:options AS text[]),
        CAST(:descriptions AS text[])
    ) AS published (name, payload_schema, options, description)
    ON CONFLICT (name) DO UPDATE
    SET payload_schema = excluded.payload_schema,
        options = excluded.options,
        description = excluded.description,
        published_by = excluded.published_by,
        published_at = now()
    """,
)

PUBLISHED_TYPES = Statement("published_types", "SELECT * FROM job_types ORDER BY name")
