"""The OpenAPI schemas of the request bodies the routes decode themselves (so that every
refusal carries msgspec's own message, Litestar never sees their Structs): generated from
the wire Structs (`jobqueue.wire.requests`) by msgspec, field descriptions and bounds
included, and added to the document as components when it is served. Nothing here is
written out by hand: a field added to a Struct is in the document."""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

import msgspec
from litestar.openapi.spec import Reference

from jobqueue.domain.bulk import SELECTABLE
from jobqueue.domain.transitions import Operation
from jobqueue.wire.action_requests import BulkRequest, RescheduleRequest
from jobqueue.wire.queue_requests import QueueLimitsRequest
from jobqueue.wire.requests import BatchRequest, CreateJobRequest

COMPONENTS = "#/components/schemas/"


def reference(name: str) -> Reference:
    """A route's body: the component `name`, added by `with_request_schemas`."""
    return Reference(ref=COMPONENTS + name)


def bulk_request(operation: Operation) -> str:
    """The component of a bulk action's body: `BulkRequest`, its statuses `operation`'s."""
    return f"Bulk{operation.value.capitalize()}Request"


@cache
def _components() -> dict[str, Any]:
    _, components = msgspec.json.schema_components(
        (CreateJobRequest, BatchRequest, BulkRequest, RescheduleRequest, QueueLimitsRequest),
        ref_template=COMPONENTS + "{name}",
    )
    bulk = components.pop("BulkRequest")
    for operation, statuses in SELECTABLE.items():
        narrowed = copy.deepcopy(bulk)
        narrowed["title"] = bulk_request(operation)
        narrowed["properties"]["status"] = {
            "type": "string",
            "enum": sorted(status.value for status in statuses),
            "description": f"Act on jobs of this status: {operation} takes these.",
        }
        components[bulk_request(operation)] = narrowed
    # A job's body refuses fields it does not know (`forbid_unknown_fields`).
    for schema in components.values():
        if schema.get("type") == "object":
            schema.setdefault("additionalProperties", False)
    return components


def with_request_schemas(document: dict[str, Any]) -> dict[str, Any]:
    """`document` (not copied) with the request bodies' schemas among its components."""
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in _components().items():
        schemas.setdefault(name, copy.deepcopy(schema))
    return document
