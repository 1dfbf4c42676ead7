"""The OpenAPI document with the job types in it: one body variant per type (a whole
component, told apart by `type`), payload definitions moved into components under each
type's own names, references rewritten, no two names one class of a generated client."""

from __future__ import annotations

import copy
import re
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


def _resolved(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    name = schema["$ref"].removeprefix("#/components/schemas/")
    found: dict[str, Any] = document["components"]["schemas"][name]
    return found


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
    mapping = create["schema"]["discriminator"]["mapping"]
    assert create["schema"]["discriminator"]["propertyName"] == "type"
    assert mapping == {
        "billing/invoice": "#/components/schemas/CreateJobRequest.billing_invoice",
        "billing invoice": "#/components/schemas/CreateJobRequest.billing_invoice_2",
        "free": "#/components/schemas/CreateJobRequest.free",
    }
    assert create["schema"]["oneOf"] == [{"$ref": target} for target in mapping.values()]
    first = _resolved(typed, create["schema"]["oneOf"][0])
    # The body whole, not an allOf: generators cannot merge a narrowed `type` into one.
    assert "allOf" not in first
    assert set(first["properties"]) == set(schemas["CreateJobRequest"]["properties"])
    assert first["required"] == ["type"]
    assert first["additionalProperties"] is False
    assert first["title"] == "CreateJobRequest.billing_invoice"
    assert first["description"] == "Send an invoice."
    assert first["properties"]["type"]["const"] == "billing/invoice"
    assert first["properties"]["type"]["type"] == "string"
    assert first["properties"]["payload"] == {
        "$ref": "#/components/schemas/billing_invoice.Payload"
    }
    # The second name sanitises to the first's prefix: it gets one of its own.
    second = _resolved(typed, create["schema"]["oneOf"][1])
    assert second["properties"]["payload"] == {
        "$ref": "#/components/schemas/billing_invoice_2.Payload"
    }
    assert schemas["billing_invoice.Payload"]["properties"]["inner"] == {
        "$ref": "#/components/schemas/billing_invoice.Inner"
    }
    assert schemas["billing_invoice.Inner"]["items"] == [
        {"$ref": "#/components/schemas/billing_invoice.Inner"}
    ]
    # Titles name a generated client's classes: two types' `Payload`s stay two.
    assert schemas["billing_invoice.Payload"]["title"] == "billing_invoice.Payload"
    assert schemas["billing_invoice_2.Payload"]["title"] == "billing_invoice_2.Payload"
    assert "$defs" not in str(typed)
    free = _resolved(typed, create["schema"]["oneOf"][2])
    assert "description" in free["properties"]["payload"]
    assert schemas["CreateJobRequest"]["required"] == ["type"]
    items = schemas["BatchRequest"]["properties"]["jobs"]["items"]
    assert list(items["discriminator"]["mapping"]) == ["billing/invoice", "billing invoice", "free"]
    batch_first = _resolved(typed, items["oneOf"][0])
    assert set(batch_first["properties"]) == set(schemas["BatchJob"]["properties"])
    assert batch_first["properties"]["type"]["const"] == "billing/invoice"


def test_no_two_components_fold_to_one_class_name() -> None:
    # `a_b` and `aB` make prefixes that differ, but generators fold both to `AB…`; and a
    # type named after one of the document's own components would fold into it.
    known = [
        _known("a_b", _nested("Payload")),
        _known("aB", _nested("Payload")),
        _known("Error", {"$ref": "#/$defs/Body", "$defs": {"Body": {"type": "object"}}}),
    ]

    schemas = with_job_types(_document(), known)["components"]["schemas"]

    folded = [re.sub("[^a-z0-9]", "", name.lower()) for name in schemas]
    assert len(folded) == len(set(folded)), sorted(schemas)
    assert {"a_b.Payload", "aB_2.Payload", "Error_2.Body"} <= set(schemas)


def test_a_tagged_unions_mapping_points_at_the_moved_definitions() -> None:
    schema = {
        "$ref": "#/$defs/Event",
        "$defs": {
            "Event": {
                "anyOf": [{"$ref": "#/$defs/Opened"}, {"$ref": "#/$defs/Closed"}],
                "discriminator": {
                    "propertyName": "type",
                    "mapping": {"opened": "#/$defs/Opened", "closed": "#/$defs/Closed"},
                },
            },
            "Opened": {"type": "object"},
            "Closed": {"type": "object"},
        },
    }

    schemas = with_job_types(_document(), [_known("audit", schema)])["components"]["schemas"]

    assert schemas["audit.Event"]["discriminator"]["mapping"] == {
        "opened": "#/components/schemas/audit.Opened",
        "closed": "#/components/schemas/audit.Closed",
    }


def test_without_types_the_document_is_left_as_it_is() -> None:
    document = _document()

    assert with_job_types(document, []) is document
