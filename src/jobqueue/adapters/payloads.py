"""Payload conversion with msgspec: JSON values into the types handlers declare."""

from __future__ import annotations

from typing import Any

import msgspec

from jobqueue.domain.errors import InvalidPayload
from jobqueue.domain.job import JsonValue


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
