"""The OpenAPI document with the job types the API accepts now: each type's payload
schema, and the bodies of POST /jobs and POST /jobs/batch as one variant per type.

Types change while the API runs (a worker publishes new ones), so they are added when
the document is served, not when it is built: `TypedDocument` serves Litestar's document
with them, rebuilt only when the catalogue changes.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import Any

from litestar import Request
from litestar.openapi.plugins import JsonRenderPlugin

from jobqueue.domain.job_types import KnownType
from jobqueue.entrypoints.http.request_schemas import COMPONENTS, with_request_schemas
from jobqueue.entrypoints.service.published_types import TypeCatalogue

# What an OpenAPI component name may hold.
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class TypedDocument(JsonRenderPlugin):
    """`/schema/openapi.json`, with `types`' current job types in it."""

    def __init__(self, types: TypeCatalogue) -> None:
        super().__init__()
        self._types = types
        self._rendered: tuple[int, bytes] | None = None

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        version = self._types.version
        if self._rendered is None or self._rendered[0] != version:
            document = with_request_schemas(copy.deepcopy(openapi_schema))
            document = with_job_types(document, self._types.current.described())
            self._rendered = (version, self.render_json(request, document))
        return self._rendered[1]


def with_job_types(document: dict[str, Any], known: Sequence[KnownType]) -> dict[str, Any]:
    """A copy of `document` in which a job's body is one of the `known` types, each with
    its payload's schema (as components named after the type)."""
    if not known:
        return document
    typed = copy.deepcopy(document)
    schemas: dict[str, Any] = typed.setdefault("components", {}).setdefault("schemas", {})
    payloads = {each.type.name: _payload(each, schemas) for each in known}
    create = typed["paths"]["/jobs"]["post"]["requestBody"]["content"]["application/json"]
    create["schema"] = _one_per_type("CreateJobRequest", known, payloads)
    jobs = schemas["BatchRequest"]["properties"]["jobs"]
    jobs["items"] = _one_per_type("BatchJob", known, payloads)
    return typed


def _one_per_type(
    name: str, known: Sequence[KnownType], payloads: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """One variant per type of the body that is the component `name`: the body with that
    `type` and that type's payload."""
    variants = []
    for each in known:
        variant: dict[str, Any] = {
            "title": each.type.name,
            "allOf": [
                {"$ref": COMPONENTS + name},
                {
                    "type": "object",
                    "properties": {
                        "type": {"const": each.type.name},
                        "payload": payloads[each.type.name],
                    },
                },
            ],
        }
        if each.type.description:
            variant["description"] = each.type.description
        variants.append(variant)
    return {"oneOf": variants}


def _payload(known: KnownType, schemas: dict[str, Any]) -> dict[str, Any]:
    """The schema of `known`'s payload, its definitions moved into `schemas` under names
    of its own (two types may each define a `Payload`)."""
    schema = known.type.payload_schema
    if schema is None:
        return {"description": "Any JSON value (the type declares no payload type)."}
    prefix = _component_prefix(known.type.name, schemas)
    definitions = schema.get("$defs")
    if isinstance(definitions, dict):
        for name, definition in definitions.items():
            schemas[prefix + name] = _referenced(definition, prefix)
    root: dict[str, Any] = _referenced(
        {key: value for key, value in schema.items() if key != "$defs"}, prefix
    )
    return root


def _component_prefix(job_type: str, schemas: dict[str, Any]) -> str:
    base = f"{_NAME_UNSAFE.sub('_', job_type)}."
    prefix, number = base, 1
    # Two type names that differ only in unsafe characters would share a prefix.
    while any(name.startswith(prefix) for name in schemas):
        number += 1
        prefix = f"{base[:-1]}_{number}."
    return prefix


def _referenced(value: Any, prefix: str) -> Any:
    """`value` with every reference to its own `$defs` pointing at the components."""
    if isinstance(value, dict):
        reference = value.get("$ref")
        moved = {key: _referenced(item, prefix) for key, item in value.items()}
        if isinstance(reference, str) and reference.startswith("#/$defs/"):
            moved["$ref"] = COMPONENTS + prefix + reference.removeprefix("#/$defs/")
        return moved
    if isinstance(value, list):
        return [_referenced(item, prefix) for item in value]
    return value
