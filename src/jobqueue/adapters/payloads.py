"""Payload conversion with msgspec: JSON values into the types handlers declare."""

from __future__ import annotations

from typing import Any

import msgspec

from jobqueue.domain.errors import InvalidPayload
from jobqueue.domain.fields import JsonValue
from jobqueue.domain.job_types import JsonSchema


class MsgspecPayloadDecoder:
    """`PayloadDecoder` for anything `msgspec.convert` accepts: Structs, dataclasses,
    TypedDicts, attrs classes, builtin containers.

    Conversion is strict ("1" is not an int), since clients send JSON and JSON has types.
    """

    def decode(self, job_type: str, payload: JsonValue, into: type[Any]) -> Any:
        try:
            return msgspec.convert(payload, into)
        except msgspec.ValidationError as error:
            # msgspec's message names the expected type and the path ("at `$.duration`"),
            # which is what a client needs to fix the request.
            raise InvalidPayload(job_type, str(error)) from error

    def schema(self, job_type: str, payload_type: type[Any]) -> JsonSchema | None:
        """msgspec's JSON Schema (2020-12) of `payload_type`, self-contained (its `$defs`
        inside), or None for a type msgspec converts but cannot describe (one that only
        a custom hook reads). What `__post_init__` checks (a duration's syntax) is not in
        it: an API checking by the schema alone lets such a payload through, and the
        worker refuses it at run time."""
        try:
            schema: JsonSchema = msgspec.json.schema(payload_type)
        except (TypeError, ValueError):
            return None
        return schema
