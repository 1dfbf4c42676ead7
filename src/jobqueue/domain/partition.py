"""Partition keys: which share of a queue a job belongs to (a tenant, an account, a
customer), so that a queue's per-key limits (`flow.QueueLimits.key_concurrency` and
`key_rate`) cap how many of one key's jobs run at once and start within a period, and
claims rotate between keys (`docs/flow-control.md`).

A key is given with a submission, or derived from payload fields its type's handler
names (`partition_by=("tenant_id",)`), as unique keys are. A job without one is in no
partition: a per-key limit does not count it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jobqueue.domain.errors import InvalidJob

MAX_PARTITION_KEY_LENGTH = 255


def check_partition_key(key: object) -> None:
    if key is None:
        return
    if not isinstance(key, str) or not key or len(key) > MAX_PARTITION_KEY_LENGTH:
        raise InvalidJob(
            f"partition_key must be a string of 1 to {MAX_PARTITION_KEY_LENGTH} characters"
        )


def check_partition_by(fields: object) -> None:
    if fields is None:
        return
    if (
        not isinstance(fields, tuple)
        or not fields
        or not all(isinstance(name, str) and name for name in fields)
    ):
        raise InvalidJob("partition_by must name one or more payload fields")


def partition_key_of(payload: Any, fields: tuple[str, ...]) -> str:
    """The key the payload's `fields` make: a lone text field's value as it is (so a
    tenant's key reads as the tenant), anything else as the JSON of the values in
    order."""
    if not isinstance(payload, Mapping):
        raise InvalidJob("partition_by names payload fields, but the payload is not an object")
    absent = [name for name in fields if name not in payload]
    if absent:
        raise InvalidJob(f"partition_by: the payload has no field {', '.join(absent)}")
    values = [payload[name] for name in fields]
    if len(values) == 1 and isinstance(values[0], str):
        key = values[0]
    else:
        chosen = values[0] if len(values) == 1 else values
        key = json.dumps(chosen, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    if not key or len(key) > MAX_PARTITION_KEY_LENGTH:
        raise InvalidJob(
            f"partition_by: the key made of {', '.join(fields)} must be 1 to "
            f"{MAX_PARTITION_KEY_LENGTH} characters"
        )
    return key
