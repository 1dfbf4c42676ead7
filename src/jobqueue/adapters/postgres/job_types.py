"""The job types workers published, on PostgreSQL: a row of `job_types` per type.

A worker writes all of its types in one statement at start, in name order, so workers
starting together wait for each other's rows instead of deadlocking. Options are kept
as JSON with room for more: a row written by a newer version, with keys this one does
not know, is read for what it does know, and a row it cannot read at all is skipped
with a warning rather than taking the API down.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.driver import fetch_pooled
from jobqueue.adapters.postgres.failures import store_failures
from jobqueue.adapters.postgres.queries.job_types import PUBLISH_TYPES, PUBLISHED_TYPES
from jobqueue.domain.errors import InvalidJob
from jobqueue.domain.fields import JsonValue
from jobqueue.domain.job_types import JobType, PublishedType
from jobqueue.domain.status import Status
from jobqueue.domain.type_options import TypeOptions
from jobqueue.domain.unique import Unique

_log = logging.getLogger("jobqueue")


class PostgresJobTypes:
    """`JobTypeCatalog` on PostgreSQL."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def publish(self, types: Sequence[JobType], by: str) -> None:
        """Write `types` as `by`'s: each replaces what an earlier worker said of it."""
        if not types:
            return
        ordered = sorted(types, key=lambda each: each.name)
        values = {
            "names": [each.name for each in ordered],
            "payload_schemas": [
                None if each.payload_schema is None else json.dumps(each.payload_schema)
                for each in ordered
            ],
            "options": [json.dumps(options_json(each.options)) for each in ordered],
            "descriptions": [each.description for each in ordered],
            "published_by": by,
        }
        with store_failures():
            await fetch_pooled(self._engine, PUBLISH_TYPES, values)

    async def published(self) -> list[PublishedType]:
        """Every published type, by name."""
        with store_failures():
            rows = await fetch_pooled(self._engine, PUBLISHED_TYPES, {})
        found = []
        for row in rows:
            try:
                options = options_from_json(row["options"])
            except (InvalidJob, TypeError, ValueError) as error:
                _log.warning(
                    "a published job type cannot be read; it is left out",
                    extra={"job_type": row["name"], "error": str(error)},
                )
                continue
            found.append(
                PublishedType(
                    JobType(row["name"], row["payload_schema"], options, row["description"]),
                    published_at=row["published_at"],
                    published_by=row["published_by"],
                )
            )
        return found


def options_json(options: TypeOptions) -> dict[str, JsonValue]:
    """`options` as the JSON a row keeps (and `GET /types` shows)."""
    unique = options.unique
    timeout = options.timeout
    return {
        "queue": options.queue,
        "priority": options.priority,
        "max_attempts": options.max_attempts,
        "timeout_seconds": None if timeout is None else timeout.total_seconds(),
        "unique": None
        if unique is None
        else {
            "key": unique.key,
            "by": None if unique.by is None else [*unique.by],
            "states": [*sorted(status.value for status in unique.states)],
            "period_seconds": None if unique.period is None else int(unique.period.total_seconds()),
        },
        "partition_by": None if options.partition_by is None else [*options.partition_by],
    }


def options_from_json(value: Mapping[str, Any]) -> TypeOptions:
    """The options `options_json` wrote. Raises `InvalidJob`, `TypeError` or `ValueError`
    for a value it did not write."""
    unique: Mapping[str, Any] | None = value.get("unique")
    period = None if unique is None else unique.get("period_seconds")
    by = None if unique is None else unique.get("by")
    # Absent from what a version before attempt timeouts were options wrote.
    timeout = value.get("timeout_seconds")
    # Absent from what a version before partition keys wrote.
    partition_by = value.get("partition_by")
    return TypeOptions(
        queue=value["queue"],
        priority=value["priority"],
        max_attempts=value.get("max_attempts"),
        timeout=None if timeout is None else timedelta(seconds=timeout),
        unique=None
        if unique is None
        else Unique(
            key=unique.get("key"),
            by=None if by is None else tuple(by),
            states=frozenset(Status(state) for state in unique["states"]),
            period=None if period is None else timedelta(seconds=period),
        ),
        partition_by=None if partition_by is None else tuple(partition_by),
    )
