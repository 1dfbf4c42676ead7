"""`DataclassDecoder`: a `PayloadDecoder` for the unit tests' dataclass payloads."""

from __future__ import annotations

from dataclasses import is_dataclass
from typing import Any

from jobqueue.domain.errors import InvalidPayload
from jobqueue.domain.fields import JsonValue
from jobqueue.domain.job_types import JsonSchema


class DataclassDecoder:
    """`PayloadDecoder` for dataclass payload types: fields from a JSON object."""

    def decode(self, job_type: str, payload: JsonValue, into: type[Any]) -> Any:
        if not is_dataclass(into) or not isinstance(payload, dict):
            raise InvalidPayload(job_type, f"expected an object for {into.__name__}")
        try:
            return into(**payload)
        except TypeError as error:
            raise InvalidPayload(job_type, str(error)) from error

    def schema(self, job_type: str, payload_type: type[Any]) -> JsonSchema | None:
        # The unit tests publish no types: their dataclass payloads take any JSON.
        return None
