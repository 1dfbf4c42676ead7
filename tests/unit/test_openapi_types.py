"""The OpenAPI document with the job types in it: one body variant per type, payload
definitions moved into components under each type's own names, references rewritten."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from jobqueue.domain.job_types import JobType, KnownType, PublishedType
from jobqueue.entrypoints.http.openapi_types import with_job_types
from jobqueue.entrypoints.http.request_schemas import with_request_schemas


def _body(component: str) -> dict[str, Any]:
    schema = {"$ref": f"#/components/schemas/{component}"}
    return {"post": {"requestBody": {"content": {"application/json": {"schema": schema}}}}}


def _document() -> dict[str, Any]:
    # As Litestar builds it (the bodies referenced), with the request schemas added.
    return with_request_schemas(
        {
            "openapi": "3.1.0",
            "paths": {"/jobs": _body("CreateJobRequest"), "/jobs/batch": _body("BatchRequest")},
            "components": {"schemas": {"ErrorBody": {"type": "object"}}},
        }
    )


def _known(name: str, schema: dict[str, Any] | None, description: str | None = None) -> KnownType:
    declared = JobType(name, schema, description=description)
    return KnownType(declared, False, PublishedType(declared, datetime.now(UTC), "w:1"))


def _nested(name: str) -> dict[str, Any]:
    return {
        "$ref": f"#/$defs/{name}",
        "$defs": {
            name: {"type": "object", "properties": {"inner": {"$ref": "#/$defs/Inner"}}},
            "Inner": {"type": "array", "items": [{"$ref": "#/$defs/Inner"}]},
        },
    }


def test_each_type_is_a_variant_of_the_bodies_with_its_own_payload_components() -> None:
    original = _document()
    kept = copy.deepcopy(original)
    known = [
        _known("billing/invoice", _nested("Payload"), "Send an invoice."),
        _known("billing invoice", _nested("Payload")),
        _known("free", None),
    ]

    typed = with_job_types(original, known)

    assert original == kept, "the document Litestar caches is not changed"
    schemas = typed["components"]["schemas"]
    create = typed["paths"]["/jobs"]["post"]["requestBody"]["content"]["application/json"]
    variants = create["schema"]["oneOf"]
    assert [v["title"] for v in variants] == ["billing/invoice", "billing invoice", "free"]
    first = variants[0]
    assert first["description"] == "Send an invoice."
    assert first["allOf"][0] == {"$ref": "#/components/schemas/CreateJobRequest"}
    assert first["allOf"][1]["properties"]["type"] == {"const": "billing/invoice"}
    assert first["allOf"][1]["properties"]["payload"] == {
        "$ref": "#/components/schemas/billing_invoice.Payload"
    }
    # The second name sanitises to the first's prefix: it gets one of its own.
    assert variants[1]["allOf"][1]["properties"]["payload"] == {
        "$ref": "#/components/schemas/billing_invoice_2.Payload"
    }
    assert schemas["billing_invoice.Payload"]["properties"]["inner"] == {
        "$ref": "#/components/schemas/billing_invoice.Inner"
    }
    assert schemas["billing_invoice.Inner"]["items"] == [
        {"$ref": "#/components/schemas/billing_invoice.Inner"}
    ]
    assert "$defs" not in str(typed)
    assert "description" in variants[2]["allOf"][1]["properties"]["payload"]
    assert schemas["CreateJobRequest"]["required"] == ["type"]
    items = schemas["BatchRequest"]["properties"]["jobs"]["items"]
    assert [v["allOf"][0]["$ref"] for v in items["oneOf"]] == ["#/components/schemas/BatchJob"] * 3


def test_without_types_the_document_is_left_as_it_is() -> None:
    document = _document()

    assert with_job_types(document, []) is document
