"""Payload checks by JSON Schema, with `jsonschema`: how an API process that lacks a job
type's code checks its payloads against the schema its workers published.

`jsonschema` is the reference implementation of every draft, including 2020-12, which
msgspec writes (faster validators stop at draft 7). One validator is built per type when
the published types are read, never per request.
"""

from __future__ import annotations

import logging

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match
from jsonschema.validators import validator_for

from jobqueue.domain.errors import InvalidPayload
from jobqueue.domain.fields import JsonValue
from jobqueue.domain.job_types import JsonSchema, PayloadCheck

_log = logging.getLogger("jobqueue")


class JsonSchemaCompiler:
    """`SchemaCompiler` with `jsonschema`."""

    def compile(self, job_type: str, schema: JsonSchema) -> PayloadCheck:
        document = dict(schema)
        validating = validator_for(document, default=Draft202012Validator)
        try:
            validating.check_schema(document)
        except SchemaError as error:
            # A worker published something no validator can use: its own checks still
            # run when the job does, so accept the type's payloads here rather than none.
            _log.warning(
                "a published payload schema is not valid JSON Schema; its payloads are "
                "checked only by the worker",
                extra={"job_type": job_type, "error": error.message},
            )
            return _anything
        validator = validating(document)

        def check(payload: JsonValue) -> None:
            error = best_match(validator.iter_errors(payload))
            if error is not None:
                # The path as msgspec writes it ("at `$.duration`"), so a client sees one
                # style whichever process checked its job.
                raise InvalidPayload(job_type, f"{error.message} - at `{error.json_path}`")

        return check


def _anything(payload: JsonValue) -> None:
    return None
