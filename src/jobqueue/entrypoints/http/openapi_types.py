"""The OpenAPI document with the job types the API accepts now: each type's payload
schema, and the bodies of POST /jobs and POST /jobs/batch as one variant per type.

Types change while the API runs (a worker publishes new ones), so they are added when
the document is served, not when it is built: `TypedDocument` serves Litestar's document
with them, rebuilt only when the catalogue changes.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import Any

from litestar import Request
from litestar.openapi.plugins import JsonRenderPlugin

from jobqueue.domain.job_types import KnownType
from jobqueue.entrypoints.http.request_schemas import COMPONENTS, with_request_schemas
from jobqueue.entrypoints.service.published_types import TypeCatalogue
from jobqueue.wire.requests import BatchJob, BatchRequest, CreateJobRequest

# What an OpenAPI component name may hold.
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
# What generators keep of a name when they make a class of it (case aside).
_UNFOLDED = re.compile(r"[^a-z0-9]")
_DEFS = "#/$defs/"
# The bodies that have one variant per type: components of `request_schemas`, which
# msgspec names after their Structs.
_CREATE = CreateJobRequest.__name__
_BATCH = BatchJob.__name__


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
    variants: dict[str, dict[str, str]] = {_CREATE: {}, _BATCH: {}}
    for each in known:
        prefix = _component_prefix(each, schemas)
        payload = _payload(each, prefix, schemas)
        for body, mapping in variants.items():
            component = _variant_name(body, prefix)
            schemas[component] = _variant(schemas[body], component, each, payload)
            mapping[each.type.name] = COMPONENTS + component
    create = typed["paths"]["/jobs"]["post"]["requestBody"]["content"]["application/json"]
    create["schema"] = _one_of(variants[_CREATE])
    schemas[BatchRequest.__name__]["properties"]["jobs"]["items"] = _one_of(variants[_BATCH])
    return typed


def _variant(
    body: dict[str, Any], component: str, known: KnownType, payload: dict[str, Any]
) -> dict[str, Any]:
    """`body` whole, with `known`'s name as its `type` and `known`'s payload.

    Whole, not an `allOf` of the body and a narrowing: client generators (openapi-python-
    client among them) cannot merge a `const` into the body's `type`, and leave out the
    operation."""
    variant = copy.deepcopy(body)
    # Generators name a class after its schema's title: the component's name is unique.
    variant["title"] = component
    if known.type.description:
        variant["description"] = known.type.description
    variant["properties"]["type"] = {
        "description": f"The job type {known.type.name!r}.",
        "type": "string",
        "const": known.type.name,
    }
    variant["properties"]["payload"] = copy.deepcopy(payload)
    return variant


def _one_of(mapping: dict[str, str]) -> dict[str, Any]:
    """One of the variants in `mapping` (a type's name to its variant), told by `type`."""
    return {
        "oneOf": [{"$ref": reference} for reference in mapping.values()],
        "discriminator": {"propertyName": "type", "mapping": mapping},
    }


def _variant_name(body: str, prefix: str) -> str:
    # The body first: a type's payload may itself define a `CreateJobRequest`.
    return f"{body}.{prefix[:-1]}"


def _payload(known: KnownType, prefix: str, schemas: dict[str, Any]) -> dict[str, Any]:
    """The schema of `known`'s payload, its definitions moved into `schemas` under names
    of its own (two types may each define a `Payload`)."""
    schema = known.type.payload_schema
    if schema is None:
        return {"description": "Any JSON value (the type declares no payload type)."}
    for name, definition in _definitions(schema).items():
        moved = _referenced(definition, prefix)
        if isinstance(moved, dict):
            moved["title"] = prefix + name
        schemas[prefix + name] = moved
    root: dict[str, Any] = _referenced(
        {key: value for key, value in schema.items() if key != "$defs"}, prefix
    )
    return root


def _definitions(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    definitions = schema.get("$defs")
    return definitions if isinstance(definitions, dict) else {}


def _component_prefix(known: KnownType, schemas: dict[str, Any]) -> str:
    """A prefix for `known`'s components that no other component starts with, and that
    makes no name a generated client's class would share with another: generators drop
    what is not a letter or a digit, and the case (`a_b.Payload` and `aB.Payload` are
    both `ABPayload`), and name classes after titles as well as components."""
    base = f"{_NAME_UNSAFE.sub('_', known.type.name)}."
    taken = {_folded(name) for name in schemas} | {
        _folded(schema["title"])
        for schema in schemas.values()
        if isinstance(schema, dict) and isinstance(schema.get("title"), str)
    }
    prefix, number = base, 1
    while any(name.startswith(prefix) for name in schemas) or not _free(known, prefix, taken):
        number += 1
        prefix = f"{base[:-1]}_{number}."
    return prefix


def _free(known: KnownType, prefix: str, taken: set[str]) -> bool:
    names = [prefix + name for name in _definitions(known.type.payload_schema or {})]
    names += [_variant_name(body, prefix) for body in (_CREATE, _BATCH)]
    folded = {_folded(name) for name in names}
    return len(folded) == len(names) and not folded & taken


def _folded(name: str) -> str:
    return _UNFOLDED.sub("", name.lower())


def _referenced(value: Any, prefix: str) -> Any:
    """`value` with every reference to its own `$defs` pointing at the components: each
    `$ref`, and each of a discriminator's mapping (msgspec's tagged unions)."""
    if isinstance(value, dict):
        moved = {key: _referenced(item, prefix) for key, item in value.items()}
        reference = value.get("$ref")
        if isinstance(reference, str):
            moved["$ref"] = _moved(reference, prefix)
        discriminator = moved.get("discriminator")
        if isinstance(discriminator, dict) and isinstance(discriminator.get("mapping"), dict):
            discriminator["mapping"] = {
                tag: _moved(target, prefix) if isinstance(target, str) else target
                for tag, target in discriminator["mapping"].items()
            }
        return moved
    if isinstance(value, list):
        return [_referenced(item, prefix) for item in value]
    return value


def _moved(reference: str, prefix: str) -> str:
    if reference.startswith(_DEFS):
        return COMPONENTS + prefix + reference.removeprefix(_DEFS)
    return reference
